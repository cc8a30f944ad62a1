// Pre-tokenizer: splits raw text into the words that BPE merges run inside, using the regex
// cascade llama.cpp applies for the GGUF's tokenizer.ggml.pre value.
//
// Each stage's regex runs inside every piece the previous stage produced (a match never
// crosses a piece boundary, and a lookahead sees the piece's end as end of text); both the
// matches and the unmatched text between them become pieces. Regexes run in PCRE2 with UTF
// and UCP, except that \s is spelled out as the Unicode White_Space set llama.cpp uses (PCRE2's
// own \s also takes U+180E).
//
// Malformed UTF-8 is replaced the way llama.cpp does it (see unicode_utf8.h) before
// splitting, so the words returned are the re-encoded text llama.cpp would feed to BPE.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace infinipot {

class PreTokenizer {
 public:
  // Known names: "default" (also used when the key is absent), "gpt2"/"gpt-2" and their
  // aliases, "smollm"/"starcoder" (digits split one by one, then GPT-2), "llama3"/"llama-bpe".
  // Anything else is a TokenizerError naming the value.
  static PreTokenizer for_name(const std::string& pre);

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Words of `text`, in order; their concatenation is the sanitised text.
  std::vector<std::string> split(std::string_view text) const;

  const std::string& name() const;
  // llama3-style vocabularies emit a whole word as one token when the vocabulary has it,
  // without running merges (llama.cpp's ignore_merges).
  bool ignore_merges() const;

 private:
  struct Impl;
  explicit PreTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace infinipot
