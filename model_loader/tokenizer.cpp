// Byte-level BPE tokenizer. The pipeline, as in llama.cpp's llama_tokenize:
//   1. special-token split: texts of control / user-defined / unknown tokens found in the raw
//      bytes become those tokens (longest token text first, each over the whole text);
//   2. pre-tokenizer regex cascade on each remaining fragment (pretokenizer.h);
//   3. each word's bytes mapped to the GPT-2 byte alphabet, then BPE merges (bpe.h).
#include "model_loader/tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "model_loader/bpe.h"
#include "model_loader/pretokenizer.h"
#include "model_loader/unicode_utf8.h"

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

// llama.cpp's rendering of a normal token: every character is one byte of the byte-level
// alphabet; a character outside it is shown as [UNK_BYTE_0x..] followed by the token text.
std::string decode_byte_level(const std::string& text) {
  const auto& alphabet = utf8::ByteAlphabet::get();
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    const uint32_t cp = utf8::decode_lenient(text, pos);
    const int byte = alphabet.decode(cp);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
      continue;
    }
    out += "[UNK_BYTE_0x";
    std::string encoded;
    utf8::append(encoded, cp);
    for (char c : encoded) out += fmt::format("{:02x}", static_cast<uint8_t>(c));
    out += text;  // llama.cpp appends the whole token text
    out += "]";
  }
  return out;
}

// "<0xAB>" -> 0xAB, else -1. gpt2 vocabularies rarely have byte tokens; llama.cpp aborts on
// them, we render the byte.
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

// A piece of the input: raw text [begin, begin+len) when token < 0, else a special token.
struct Fragment {
  TokenId token;
  size_t begin, len;
};

}  // namespace

struct Tokenizer::Impl {
  Impl(std::vector<std::string> token_texts, const std::vector<std::string>& merges, PreTokenizer pre_tok)
      : texts(std::move(token_texts)), bpe(texts, merges), pre(std::move(pre_tok)) {}

  std::vector<std::string> texts;   // vocabulary, byte-level alphabet text
  std::vector<int64_t> types;       // TokenType per token
  std::vector<std::string> pieces;  // rendered text per token (specials rendered)
  std::vector<bool> hidden;         // control/unknown: rendered only with render_special
  BpeMerges bpe;
  PreTokenizer pre;
  std::vector<TokenId> specials;    // matched in raw text, longest text first
  std::vector<TokenId> end_of_generation;
  TokenId bos = -1, eos = -1, eot = -1;
  bool add_bos = false;

  std::vector<Fragment> split_specials(const std::string& text, bool parse_special) const;
  void encode_fragment(std::string_view text, std::vector<TokenId>& out,
                       std::unordered_map<std::string, std::vector<TokenId>>& cache) const;
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_gguf(const gguf::GgufFile& file) {
  if (!file.has("tokenizer.ggml.model")) throw TokenizerError("missing tokenizer.ggml.model");
  const std::string model = file.get_string("tokenizer.ggml.model");
  if (model != "gpt2") {
    throw TokenizerError(fmt::format(
        "unsupported tokenizer model tokenizer.ggml.model = \"{}\" (only \"gpt2\" byte-level BPE is supported)",
        model));
  }
  // llama.cpp also takes a missing pre-tokenizer as "default" (with a warning).
  const std::string pre = file.has("tokenizer.ggml.pre") ? file.get_string("tokenizer.ggml.pre") : "default";
  PreTokenizer pre_tok = PreTokenizer::for_name(pre);

  std::vector<std::string> texts = file.get_string_array("tokenizer.ggml.tokens");
  if (texts.empty()) throw TokenizerError("tokenizer.ggml.tokens is empty");
  const size_t n = texts.size();
  if (n > static_cast<size_t>(INT32_MAX)) throw TokenizerError(fmt::format("vocabulary too large: {} tokens", n));
  if (!file.has("tokenizer.ggml.merges")) throw TokenizerError("missing tokenizer.ggml.merges (required for gpt2 BPE)");
  const std::vector<std::string> merges = file.get_string_array("tokenizer.ggml.merges");

  auto impl = std::make_unique<Impl>(std::move(texts), merges, std::move(pre_tok));
  if (file.has("tokenizer.ggml.token_type")) {
    impl->types = file.get_int_array("tokenizer.ggml.token_type");
    if (impl->types.size() != n) {
      throw TokenizerError(fmt::format("tokenizer.ggml.token_type has {} entries for {} tokens",
                                       impl->types.size(), n));
    }
  } else {
    impl->types.assign(n, kNormal);
  }

  impl->bos = optional_id(file, "tokenizer.ggml.bos_token_id", n);
  impl->eos = optional_id(file, "tokenizer.ggml.eos_token_id", n);
  impl->eot = optional_id(file, "tokenizer.ggml.eot_token_id", n);
  impl->add_bos = file.get_bool("tokenizer.ggml.add_bos_token", false);
  for (const char* text : kEndOfTurnTexts) {
    if (impl->eot >= 0) break;
    impl->eot = impl->bpe.find(text);
  }
  for (const char* text : kEndOfGenerationTexts) {
    const TokenId id = impl->bpe.find(text);
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
        impl->pieces[id] = decode_byte_level(text);
        break;
      case kByte: {
        const int byte = parse_byte_token(text);
        impl->pieces[id] = byte >= 0 ? std::string(1, static_cast<char>(byte)) : decode_byte_level(text);
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
      for (size_t m; (m = window.find(needle, pos)) != std::string_view::npos; pos = m + needle.size()) {
        if (m > pos) next.push_back({-1, pos, m - pos});
        next.push_back({id, m, needle.size()});
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    frags.swap(next);
  }
  return frags;
}

void Tokenizer::Impl::encode_fragment(std::string_view text, std::vector<TokenId>& out,
                                      std::unordered_map<std::string, std::vector<TokenId>>& cache) const {
  const auto& alphabet = utf8::ByteAlphabet::get();
  std::string encoded;
  for (const std::string& word : pre.split(text)) {
    encoded.clear();
    for (char c : word) encoded += alphabet.encode(static_cast<uint8_t>(c));
    if (pre.ignore_merges()) {
      const TokenId whole = bpe.find(encoded);
      if (whole >= 0) {
        out.push_back(whole);
        continue;
      }
    }
    auto [it, inserted] = cache.try_emplace(encoded);
    if (inserted) bpe.encode_word(encoded, it->second);
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
}

std::vector<TokenId> Tokenizer::encode(const std::string& text, bool add_bos, bool parse_special) const {
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && impl_->bos >= 0) out.push_back(impl_->bos);
  // Words repeat a lot in real text; merging each distinct word once is most of the speed.
  std::unordered_map<std::string, std::vector<TokenId>> cache;
  for (const Fragment& f : impl_->split_specials(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
    } else {
      impl_->encode_fragment(std::string_view(text).substr(f.begin, f.len), out, cache);
    }
  }
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

TokenId Tokenizer::find_token(const std::string& text) const { return impl_->bpe.find(text); }

bool Tokenizer::add_bos_default() const { return impl_->add_bos; }
const std::string& Tokenizer::pre_tokenizer() const { return impl_->pre.name(); }

const std::string& Tokenizer::token_text(TokenId id) const {
  if (id < 0 || id >= n_vocab()) {
    throw TokenizerError(fmt::format("token id {} out of range [0, {})", id, n_vocab()));
  }
  return impl_->texts[id];
}

}  // namespace infinipot
