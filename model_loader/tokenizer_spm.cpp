// SentencePiece (GGUF "llama"), as llama.cpp applies it: each raw fragment gets a leading
// space when tokenizer.ggml.add_space_prefix is set and it follows a special token or opens
// the text, spaces become "▁" (U+2581), and the whole fragment is merged by score (spm.h).
// There is no pre-tokenizer: a fragment is one merge session.
#include <fmt/format.h>

#include <string_view>

#include "model_loader/spm.h"
#include "model_loader/tokenizer_model.h"

namespace infinipot {
namespace {

constexpr std::string_view kSpaceMarker = "\xe2\x96\x81";  // "▁", U+2581

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  size_t at = 0;
  for (size_t hit; (hit = text.find(from, at)) != std::string_view::npos; at = hit + from.size()) {
    out.append(text.substr(at, hit - at));
    out.append(to);
  }
  out.append(text.substr(at));
  return out;
}

class SpmModel final : public TokenizerModel {
 public:
  SpmModel(SpmVocab vocab, bool add_space_prefix, std::string pre)
      : vocab_(std::move(vocab)), add_space_prefix_(add_space_prefix), pre_(std::move(pre)) {}

  void encode(std::string_view text, const std::vector<Fragment>& fragments, std::vector<TokenId>& out,
              bool continues_text) const override {
    bool after_special = !continues_text;  // the start of a text counts as one
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        out.push_back(f.token);
        after_special = true;
        continue;
      }
      std::string raw = add_space_prefix_ && after_special ? " " : "";
      raw.append(text.substr(f.begin, f.len));
      vocab_.encode(replace_all(raw, " ", kSpaceMarker), out);
      after_special = false;
    }
  }
  std::string render_normal(const std::string& text) const override { return replace_all(text, kSpaceMarker, " "); }
  TokenId find(std::string_view text) const override { return vocab_.find(text); }
  const std::string& pre_tokenizer() const override { return pre_; }
  bool strips_space_prefix() const override { return add_space_prefix_; }
  // llama.cpp's defaults for SentencePiece vocabularies that do not name them.
  TokenId default_bos() const override { return 1; }
  TokenId default_eos() const override { return 2; }
  bool default_add_bos() const override { return true; }

 private:
  SpmVocab vocab_;
  bool add_space_prefix_;
  std::string pre_;
};

}  // namespace

std::unique_ptr<TokenizerModel> make_spm_model(const gguf::GgufFile& file, const std::vector<std::string>& texts) {
  std::vector<float> scores;
  if (file.has("tokenizer.ggml.scores")) {
    scores = file.get_float_array("tokenizer.ggml.scores");
  } else {
    scores.assign(texts.size(), 0.f);  // llama.cpp's default: then merging is leftmost-first
  }
  TokenId unknown = -1;
  if (file.has("tokenizer.ggml.unknown_token_id")) {
    const uint64_t v = file.get_u64("tokenizer.ggml.unknown_token_id");
    if (v >= texts.size()) {
      throw TokenizerError(fmt::format("tokenizer.ggml.unknown_token_id = {} is out of range (vocabulary has {} tokens)",
                                       v, texts.size()));
    }
    unknown = static_cast<TokenId>(v);
  } else if (texts.size() > 0) {
    unknown = 0;  // llama.cpp's default for SentencePiece vocabularies
  }
  // llama.cpp's default for SentencePiece is to add the prefix space; the key overrides it.
  const bool add_space_prefix = file.get_bool("tokenizer.ggml.add_space_prefix", true);
  const std::string pre = file.has("tokenizer.ggml.pre") ? file.get_string("tokenizer.ggml.pre") : "default";
  return std::make_unique<SpmModel>(SpmVocab(texts, std::move(scores), unknown), add_space_prefix, pre);
}

}  // namespace infinipot
