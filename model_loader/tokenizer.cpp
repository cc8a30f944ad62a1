// The tokenizer pipeline shared by every GGUF tokenizer family, as in llama.cpp's
// llama_tokenize:
//   1. special-token split: texts of control / user-defined / unknown tokens found in the raw
//      bytes become those tokens (longest token text first, each over the whole text);
//   2. the remaining raw fragments go to the family's model (tokenizer_model.h): byte-level
//      BPE for "gpt2" (tokenizer_bpe.cpp), SentencePiece for "llama" (tokenizer_spm.cpp).
#include "model_loader/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <string_view>
#include <utility>

#include "model_loader/tokenizer_model.h"

namespace infinipot {

namespace {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum TokenType : int64_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Token texts llama.cpp treats as end of generation whatever their stored type (it also
// forces them to control tokens, which changes how they are parsed and rendered).
constexpr const char* kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>",   "<end_of_turn>",     "<|endoftext|>",
    "<|eom_id|>", "<EOT>",      "_<EOT>",    "<|end_of_text|>",   "<end_of_utterance>",
};
// End-of-turn candidates, in order of preference, when tokenizer.ggml.eot_token_id is absent.
constexpr const char* kEndOfTurnTexts[] = {"<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<EOT>"};

// Optional special-token id: -1 when absent or negative; out of range is an error.
TokenId optional_id(const gguf::GgufFile& file, const std::string& key, size_t n_vocab) {
  if (!file.has(key)) return -1;
  int64_t v = 0;
  try {
    v = file.get(key).as_i64();
  } catch (const gguf::GgufError& e) {
    throw TokenizerError(fmt::format("{} is not an integer: {}", key, e.what()));
  }
  if (v < 0) return -1;
  if (static_cast<uint64_t>(v) >= n_vocab) {
    throw TokenizerError(fmt::format("{} = {} is out of range (vocabulary has {} tokens)", key, v, n_vocab));
  }
  return static_cast<TokenId>(v);
}

// "<0xAB>" -> 0xAB, else -1. SentencePiece vocabularies have all 256; gpt2 ones rarely have
// any (llama.cpp aborts on them, we render the byte).
int parse_byte_token(const std::string& text) {
  if (text.size() != 6 || text.compare(0, 3, "<0x") != 0 || text[5] != '>') return -1;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(text[3]), lo = hex(text[4]);
  return (hi < 0 || lo < 0) ? -1 : hi * 16 + lo;
}

// llama.cpp sets token attributes by the model's name (llama-vocab.cpp, load): for a model
// whose lowercased general.name contains "phi-3" or "phi3", every special token but <unk>,
// <s> and <|endoftext|> (and </s> too) swallows the whitespace after it, so
// "<|user|>\nHi<|end|>\n<|assistant|>\n" tokenizes without the newlines. Done the same way,
// so prompts tokenize as llama.cpp's do. Per token: whether it strips what follows.
std::vector<bool> strip_after(const gguf::GgufFile& file, size_t n, const std::vector<TokenId>& specials,
                              const TokenizerModel& model) {
  std::vector<bool> rstrip(n, false);
  if (!file.has("general.name") || file.get("general.name").type != gguf::ValueType::STRING) return rstrip;
  std::string name = file.get_string("general.name");
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  if (name.find("phi-3") == std::string::npos && name.find("phi3") == std::string::npos) return rstrip;
  for (TokenId id : specials) rstrip[id] = true;
  auto set = [&](const char* text, bool value) {
    const TokenId id = model.find(text);
    if (id >= 0) rstrip[id] = value;
  };
  set("</s>", true);
  for (const char* text : {"<unk>", "<s>", "<|endoftext|>"}) set(text, false);
  return rstrip;
}

}  // namespace

struct Tokenizer::Impl {
  std::vector<std::string> texts;   // vocabulary, as stored (byte-level alphabet or "▁" text)
  std::vector<int64_t> types;       // TokenType per token
  std::vector<std::string> pieces;  // rendered text per token (specials rendered)
  std::vector<bool> hidden;         // control/unknown: rendered only with render_special
  std::unique_ptr<TokenizerModel> model;
  std::vector<TokenId> specials;    // matched in raw text, longest text first
  std::vector<bool> rstrip;         // whitespace after this special token is dropped (Phi-3)
  std::vector<TokenId> end_of_generation;
  TokenId bos = -1, eos = -1, eot = -1;
  bool add_bos = false;

  std::vector<Fragment> split_specials(const std::string& text, bool parse_special) const;
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_gguf(const gguf::GgufFile& file) {
  if (!file.has("tokenizer.ggml.model")) throw TokenizerError("missing tokenizer.ggml.model");
  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model != "gpt2" && model != "llama") {
    throw TokenizerError(fmt::format(
        "unsupported tokenizer model tokenizer.ggml.model = \"{}\" (supported: \"gpt2\" byte-level BPE, "
        "\"llama\" SentencePiece)",
        model));
  }
  if (!file.has("tokenizer.ggml.tokens")) throw TokenizerError("missing tokenizer.ggml.tokens (the vocabulary)");
  auto impl = std::make_unique<Impl>();
  impl->texts = file.get_string_array("tokenizer.ggml.tokens");
  if (impl->texts.empty()) throw TokenizerError("tokenizer.ggml.tokens is empty");
  const size_t n = impl->texts.size();
  if (n > static_cast<size_t>(INT32_MAX)) throw TokenizerError(fmt::format("vocabulary too large: {} tokens", n));
  impl->model = model == "gpt2" ? make_bpe_model(file, impl->texts) : make_spm_model(file, impl->texts);

  if (file.has("tokenizer.ggml.token_type")) {
    impl->types = file.get_int_array("tokenizer.ggml.token_type");
    if (impl->types.size() != n) {
      throw TokenizerError(fmt::format("tokenizer.ggml.token_type has {} entries for {} tokens",
                                       impl->types.size(), n));
    }
  } else {
    impl->types.assign(n, kNormal);
  }

  // The family's defaults apply when a key is absent (SentencePiece: BOS 1, EOS 2, add BOS).
  const auto default_id = [n](TokenId id) { return id >= 0 && static_cast<size_t>(id) < n ? id : -1; };
  impl->bos = file.has("tokenizer.ggml.bos_token_id") ? optional_id(file, "tokenizer.ggml.bos_token_id", n)
                                                      : default_id(impl->model->default_bos());
  impl->eos = file.has("tokenizer.ggml.eos_token_id") ? optional_id(file, "tokenizer.ggml.eos_token_id", n)
                                                      : default_id(impl->model->default_eos());
  impl->eot = optional_id(file, "tokenizer.ggml.eot_token_id", n);
  impl->add_bos = file.get_bool("tokenizer.ggml.add_bos_token", impl->model->default_add_bos());
  for (const char* text : kEndOfTurnTexts) {
    if (impl->eot >= 0) break;
    impl->eot = impl->model->find(text);
  }
  for (const char* text : kEndOfGenerationTexts) {
    const TokenId id = impl->model->find(text);
    if (id < 0) continue;
    impl->types[id] = kControl;
    impl->end_of_generation.push_back(id);
  }
  for (TokenId id : {impl->eos, impl->eot}) {
    if (id >= 0) impl->end_of_generation.push_back(id);
  }

  impl->pieces.resize(n);
  impl->hidden.resize(n);
  for (size_t id = 0; id < n; ++id) {
    const std::string& text = impl->texts[id];
    switch (impl->types[id]) {
      case kControl:
      case kUnknown:
        impl->hidden[id] = true;
        impl->pieces[id] = text;
        break;
      case kUserDefined:
        impl->pieces[id] = text;
        break;
      case kNormal:
        impl->pieces[id] = impl->model->render_normal(text);
        break;
      case kByte: {
        const int byte = parse_byte_token(text);
        impl->pieces[id] = byte >= 0 ? std::string(1, static_cast<char>(byte)) : impl->model->render_normal(text);
        break;
      }
      default:  // unused / undefined render as nothing, like llama.cpp
        break;
    }
    const int64_t t = impl->types[id];
    if ((t == kControl || t == kUserDefined || t == kUnknown) && !text.empty()) {
      impl->specials.push_back(static_cast<TokenId>(id));
    }
  }
  std::stable_sort(impl->specials.begin(), impl->specials.end(), [&](TokenId a, TokenId b) {
    return impl->texts[a].size() > impl->texts[b].size();
  });
  impl->rstrip = strip_after(file, n, impl->specials, *impl->model);
  return Tokenizer(std::move(impl));
}

std::vector<Fragment> Tokenizer::Impl::split_specials(const std::string& text, bool parse_special) const {
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, 0, text.size()});
  std::vector<Fragment> next;
  for (TokenId id : specials) {
    // Without parse_special only user-defined tokens are still split out (llama.cpp and HF
    // tokenizers agree on this).
    if (!parse_special && (types[id] == kControl || types[id] == kUnknown)) continue;
    const std::string& needle = texts[id];
    next.clear();
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      const size_t end = f.begin + f.len;
      const std::string_view window(text.data(), end);  // matches must end inside the fragment
      size_t pos = f.begin;
      for (size_t m; (m = window.find(needle, pos)) != std::string_view::npos;) {
        if (m > pos) next.push_back({-1, pos, m - pos});
        next.push_back({id, m, needle.size()});
        pos = m + needle.size();
        if (rstrip[id])  // as llama.cpp's isspace: ASCII whitespace only
          while (pos < end && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    frags.swap(next);
  }
  return frags;
}

std::vector<TokenId> Tokenizer::encode(const std::string& text, bool add_bos, bool parse_special) const {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && impl_->bos >= 0) out.push_back(impl_->bos);
  impl_->model->encode(text, impl_->split_specials(text, parse_special), out, false);
  return out;
}

bool Tokenizer::ends_with_special_token(const std::string& text) const {
  const std::vector<Fragment> frags = impl_->split_specials(text, true);
  return frags.empty() || frags.back().token >= 0;
}

std::vector<TokenId> Tokenizer::encode_continuation(const std::string& text, bool parse_special) const {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  impl_->model->encode(text, impl_->split_specials(text, parse_special), out, true);
  return out;
}

std::string Tokenizer::decode_token(TokenId id, bool render_special) const {
  if (id < 0 || id >= n_vocab()) {
    throw TokenizerError(fmt::format("token id {} out of range [0, {})", id, n_vocab()));
  }
  if (impl_->hidden[id] && !render_special) return {};
  return impl_->pieces[id];
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool render_special) const {
  std::string out;
  for (TokenId id : ids) out += decode_token(id, render_special);
  // SentencePiece's added prefix space comes off again (llama.cpp's llama_detokenize does the
  // same to the first token's text).
  if (!ids.empty() && impl_->model->strips_space_prefix()) {
    const std::string first = decode_token(ids.front(), render_special);
    if (!first.empty() && first.front() == ' ') out.erase(0, 1);
  }
  return out;
}

int Tokenizer::n_vocab() const { return static_cast<int>(impl_->texts.size()); }
TokenId Tokenizer::bos() const { return impl_->bos; }
TokenId Tokenizer::eos() const { return impl_->eos; }
TokenId Tokenizer::eot() const { return impl_->eot; }

bool Tokenizer::is_end_of_generation(TokenId id) const {
  const auto& eog = impl_->end_of_generation;
  return id >= 0 && std::find(eog.begin(), eog.end(), id) != eog.end();
}

TokenId Tokenizer::find_token(const std::string& text) const { return impl_->model->find(text); }

bool Tokenizer::add_bos_default() const { return impl_->add_bos; }
const std::string& Tokenizer::pre_tokenizer() const { return impl_->model->pre_tokenizer(); }

const std::string& Tokenizer::token_text(TokenId id) const {
  if (id < 0 || id >= n_vocab()) {
    throw TokenizerError(fmt::format("token id {} out of range [0, {})", id, n_vocab()));
  }
  return impl_->texts[id];
}

}  // namespace infinipot
