#include "model_loader/chat_template.h"

#include <fmt/format.h>

#include <utility>

namespace infinipot {

namespace {

constexpr const char* kImStart = "<|im_start|>";
constexpr const char* kImEnd = "<|im_end|>";

// Families we can name in an error, by a marker their templates cannot do without.
const char* recognise_other_family(const std::string& t) {
  if (t.find("<|start_header_id|>") != std::string::npos) return "llama3";
  if (t.find("<start_of_turn>") != std::string::npos) return "gemma";
  if (t.find("[INST]") != std::string::npos) return "mistral/llama2 [INST]";
  if (t.find("<|User|>") != std::string::npos || t.find("<\xEF\xBD\x9CUser\xEF\xBD\x9C>") != std::string::npos) {
    return "deepseek";
  }
  if (t.find("<|user|>") != std::string::npos) return "zephyr/phi3 <|user|>";
  return nullptr;
}

std::string excerpt(const std::string& t) {
  std::string head = t.substr(0, 80);
  for (char& c : head) {
    if (c == '\n') c = ' ';
  }
  return t.size() > head.size() ? head + "..." : head;
}

// Reads a constant system prompt starting at `pos` (just after "<|im_start|>system" and its
// newline) up to "<|im_end|>". Inside a Jinja string literal (`quote` != 0) escapes are
// resolved and the literal must not end before <|im_end|>: if it does, the prompt is built
// from an expression (e.g. + message['content']) and is not a default. Outside a literal the
// text must not contain a Jinja tag.
std::optional<std::string> read_constant_prompt(const std::string& t, size_t pos, char quote) {
  std::string out;
  const std::string end = kImEnd;
  while (pos < t.size()) {
    if (t.compare(pos, end.size(), end) == 0) return out;
    const char c = t[pos];
    if (quote != 0 && c == quote) return std::nullopt;
    if (quote == 0 && c == '{') return std::nullopt;
    if (quote != 0 && c == '\\' && pos + 1 < t.size()) {
      const char e = t[pos + 1];
      out.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e);
      pos += 2;
      continue;
    }
    out.push_back(c);
    ++pos;
  }
  return std::nullopt;
}

// The system prompt a ChatML template writes itself when the conversation has none, e.g.
// SmolLM2's  {{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, ...<|im_end|>\n' }}
// The newline after "system" may be a real newline or the escape \n inside the literal.
std::string find_default_system(const std::string& t) {
  const std::string marker = std::string(kImStart) + "system";
  for (size_t at = t.find(marker); at != std::string::npos; at = t.find(marker, at + 1)) {
    const char before = at > 0 ? t[at - 1] : 0;
    const char quote = (before == '\'' || before == '"') ? before : 0;
    size_t pos = at + marker.size();
    if (pos < t.size() && t[pos] == '\n') {
      pos += 1;
    } else if (quote != 0 && t.compare(pos, 2, "\\n") == 0) {
      pos += 2;
    } else {
      continue;
    }
    if (auto prompt = read_constant_prompt(t, pos, quote); prompt && !prompt->empty()) return *prompt;
  }
  return {};
}

}  // namespace

ChatTemplate ChatTemplate::from_template(const std::optional<std::string>& template_text, bool vocab_has_im_start) {
  ChatTemplate ct;
  ct.family_ = "chatml";
  ct.end_of_turn_ = kImEnd;
  if (!template_text) {
    if (!vocab_has_im_start) {
      // A base model (Gemma 3 270M): no turns to format; the engine prompts with plain text.
      ct.family_ = "none";
      ct.end_of_turn_.clear();
      return ct;
    }
    return ct;  // ChatML without a default system prompt
  }
  const std::string& t = *template_text;
  if (t.find(kImStart) == std::string::npos) {
    if (const char* other = recognise_other_family(t)) {
      throw ChatTemplateError(fmt::format("unsupported chat template family '{}' (only ChatML is implemented)", other));
    }
    throw ChatTemplateError(
        fmt::format("unrecognised chat template (only ChatML is implemented); it begins: {}", excerpt(t)));
  }
  ct.default_system_ = find_default_system(t);
  return ct;
}

ChatTemplate ChatTemplate::from_gguf(const gguf::GgufFile& file) {
  std::optional<std::string> text;
  if (file.has("tokenizer.chat_template")) text = file.get_string("tokenizer.chat_template");
  bool has_im_start = false;
  if (!text && file.has("tokenizer.ggml.tokens")) {
    const gguf::Value& tokens = file.get("tokenizer.ggml.tokens");
    for (const gguf::Value& v : tokens.array) {
      if (v.type == gguf::ValueType::STRING && v.as_string() == kImStart) {
        has_im_start = true;
        break;
      }
    }
  }
  return from_template(text, has_im_start);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  if (completion()) {
    throw ChatTemplateError("model has no tokenizer.chat_template (a base model): prompt it with plain text (--raw)");
  }
  std::string out;
  auto turn = [&](const std::string& role, const std::string& content) {
    if (role.empty() || role.find('\n') != std::string::npos) {
      throw ChatTemplateError(fmt::format("invalid chat role \"{}\" (must be non-empty, one line)", role));
    }
    out += kImStart;
    out += role;
    out += '\n';
    out += content;
    out += kImEnd;
    out += '\n';
  };
  // As SmolLM2's template does it: the default goes before the first message when that is not
  // a system message; an empty conversation gets none (the template's loop never runs).
  if (!default_system_.empty() && !messages.empty() && messages.front().role != "system") {
    turn("system", default_system_);
  }
  for (const ChatMessage& m : messages) turn(m.role, m.content);
  if (add_generation_prompt) {
    out += kImStart;
    out += "assistant\n";
  }
  return out;
}

}  // namespace infinipot
