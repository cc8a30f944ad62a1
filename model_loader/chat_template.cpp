#include "model_loader/chat_template.h"

#include <fmt/format.h>

#include <utility>

namespace infinipot {

namespace {

constexpr const char* kImStart = "<|im_start|>";
constexpr const char* kImEnd = "<|im_end|>";

// Families we can name in an error, by a marker their templates cannot do without.
const char* recognise_other_family(const std::string& t) {
  if (t.find("[INST]") != std::string::npos) return "mistral/llama2 [INST]";
  if (t.find("<|User|>") != std::string::npos || t.find("<\xEF\xBD\x9CUser\xEF\xBD\x9C>") != std::string::npos) {
    return "deepseek";
  }
  return nullptr;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\n\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\n\r") - b + 1);
}

void check_role(const std::string& role) {
  if (role.empty() || role.find('\n') != std::string::npos)
    throw ChatTemplateError(fmt::format("invalid chat role \"{}\" (must be non-empty, one line)", role));
}

// What a rendering takes from the template and the vocabulary.
struct Vocab {
  std::string default_system;  // ChatML's default system prompt
  std::string eos;             // the EOS token's text (Zephyr closes every turn with it)
};

// The families we render, each as its Jinja template does (and as llama.cpp's built-in
// renderer for it does; BOS is not part of the text: the engine adds it when the vocabulary
// asks for it, as llama.cpp's tokenizer does).

// ChatML (SmolLM2, Qwen): <|im_start|>role\ncontent<|im_end|>\n; the template's default system
// prompt goes before the first message when that is not a system message; an empty
// conversation gets none (the template's loop never runs).
std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt, const Vocab& v) {
  const std::string& default_system = v.default_system;
  std::string out;
  auto turn = [&](const std::string& role, const std::string& content) {
    check_role(role);
    out += kImStart + role + "\n" + content + kImEnd + "\n";
  };
  if (!default_system.empty() && !messages.empty() && messages.front().role != "system") turn("system", default_system);
  for (const ChatMessage& m : messages) turn(m.role, m.content);
  if (add_generation_prompt) out += std::string(kImStart) + "assistant\n";
  return out;
}

// Gemma (2 and 3): no system turn; the system text and a blank line open the first user turn;
// "assistant" is "model"; contents trimmed.
std::string render_gemma(const std::vector<ChatMessage>& messages, bool add_generation_prompt, const Vocab&) {
  std::string out, system;
  for (const ChatMessage& m : messages) {
    check_role(m.role);
    if (m.role == "system") {
      system += trim(m.content);
      continue;
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    out += "<start_of_turn>" + role + "\n";
    if (!system.empty() && role != "model") {
      out += system + "\n\n";
      system.clear();
    }
    out += trim(m.content) + "<end_of_turn>\n";
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

// Llama 3: <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>, contents trimmed.
std::string render_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt, const Vocab&) {
  std::string out;
  for (const ChatMessage& m : messages) {
    check_role(m.role);
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Zephyr (TinyLlama-Chat): <|role|>\ncontent EOS\n, the assistant turn opened with
// "<|assistant|>\n" (the newline after the template's expression line, kept by the
// trim_blocks rendering transformers uses); EOS is the vocabulary's (</s>).
std::string render_zephyr(const std::vector<ChatMessage>& messages, bool add_generation_prompt, const Vocab& v) {
  std::string out;
  for (const ChatMessage& m : messages) {
    check_role(m.role);
    out += "<|" + m.role + "|>\n" + m.content + v.eos + "\n";
  }
  if (add_generation_prompt) out += "<|assistant|>\n";
  return out;
}

// Phi-3 (and 3.5): <|role|>\ncontent<|end|>\n, the assistant turn opened with
// "<|assistant|>\n"; contents kept as they are. A system message is a <|system|> turn (the
// Phi-3.5 and later Phi-3 templates; llama.cpp's built-in phi3 renderer writes every role so).
std::string render_phi3(const std::vector<ChatMessage>& messages, bool add_generation_prompt, const Vocab&) {
  std::string out;
  for (const ChatMessage& m : messages) {
    check_role(m.role);
    out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
  }
  if (add_generation_prompt) out += "<|assistant|>\n";
  return out;
}

struct Family {
  const char* name;
  const char* marker;       // a string every template of the family has
  const char* marker2;      // and this one too ("" when one marker decides)
  const char* end_of_turn;  // the token that closes a turn ("": the vocabulary's EOS)
  std::string (*render)(const std::vector<ChatMessage>&, bool, const Vocab&);
};

const Family kFamilies[] = {
    {"chatml", kImStart, "", kImEnd, render_chatml},
    {"gemma", "<start_of_turn>", "", "<end_of_turn>", render_gemma},
    {"llama3", "<|start_header_id|>", "", "<|eot_id|>", render_llama3},
    {"phi3", "<|end|>", "<|assistant|>", "<|end|>", render_phi3},  // before zephyr: both write <|user|>
    {"zephyr", "<|user|>", "eos_token", "", render_zephyr},
};

const Family* find_family(const std::string& name) {
  for (const Family& f : kFamilies)
    if (name == f.name) return &f;
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

ChatTemplate ChatTemplate::from_template(const std::optional<std::string>& template_text, bool vocab_has_im_start,
                                         const std::string& eos_text) {
  ChatTemplate ct;
  ct.eos_ = eos_text;
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
  for (const Family& f : kFamilies) {
    if (t.find(f.marker) == std::string::npos || t.find(f.marker2) == std::string::npos) continue;
    ct.family_ = f.name;
    ct.end_of_turn_ = *f.end_of_turn ? f.end_of_turn : eos_text;
    if (ct.end_of_turn_.empty())
      throw ChatTemplateError(fmt::format("the {} chat template closes turns with the EOS token, and the vocabulary "
                                          "names none (tokenizer.ggml.eos_token_id)",
                                          f.name));
    if (ct.family_ == "chatml") ct.default_system_ = find_default_system(t);
    return ct;
  }
  if (const char* other = recognise_other_family(t)) {
    throw ChatTemplateError(
        fmt::format("unsupported chat template family '{}' (implemented: ChatML, Gemma, Llama 3, Phi-3, Zephyr)", other));
  }
  throw ChatTemplateError(fmt::format(
      "unrecognised chat template (implemented: ChatML, Gemma, Llama 3, Phi-3, Zephyr); it begins: {}", excerpt(t)));
}

ChatTemplate ChatTemplate::from_gguf(const gguf::GgufFile& file) {
  std::optional<std::string> text;
  if (file.has("tokenizer.chat_template")) text = file.get_string("tokenizer.chat_template");
  bool has_im_start = false;
  std::string eos;
  if (file.has("tokenizer.ggml.tokens")) {
    const gguf::Value& tokens = file.get("tokenizer.ggml.tokens");
    for (const gguf::Value& v : tokens.array) {
      if (v.type == gguf::ValueType::STRING && v.as_string() == kImStart) {
        has_im_start = true;
        break;
      }
    }
    // Only a Zephyr template writes EOS into the text; the tokenizer checks the id itself.
    if (text && text->find("<|user|>") != std::string::npos && file.has("tokenizer.ggml.eos_token_id")) {
      try {
        const uint64_t id = file.get_u64("tokenizer.ggml.eos_token_id");
        if (id < tokens.array.size() && tokens.array[id].type == gguf::ValueType::STRING) eos = tokens.array[id].as_string();
      } catch (const gguf::GgufError&) {
        eos.clear();  // not an unsigned id: the template is then refused for want of an EOS
      }
    }
  }
  return from_template(text, has_im_start && !text, eos);
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  if (completion()) {
    throw ChatTemplateError("model has no tokenizer.chat_template (a base model): prompt it with plain text ({raw})");
  }
  return find_family(family_)->render(messages, add_generation_prompt, Vocab{default_system_, eos_});
}

}  // namespace infinipot
