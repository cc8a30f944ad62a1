#include "model_loader/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <fmt/format.h>

#include <utility>

#include "model_loader/tokenizer.h"
#include "model_loader/unicode_utf8.h"

namespace infinipot {

namespace {

// Unicode White_Space, the set llama.cpp's \s stands for. Used inside character classes.
constexpr const char* kWs = "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}"
                            "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

std::string ws() { return fmt::format("[{}]", kWs); }
std::string not_ws() { return fmt::format("[^{}]", kWs); }

// GPT-2: contractions, optionally space-led runs of letters / numbers / other symbols, and
// whitespace runs that leave their last character to the word that follows.
std::string gpt2_pattern() {
  return fmt::format("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{{L}}+| ?\\p{{N}}+| ?[^{0}\\p{{L}}\\p{{N}}]+|{1}+(?!{2})",
                     kWs, ws(), not_ws());
}

// Llama 3: like GPT-2 but contractions in either case, one non-letter may lead a letter run,
// digits in groups of up to three, and newlines kept with the symbols before them. The case
// variants are spelled out rather than (?i:...): PCRE2's caseless mode also folds U+017F and
// U+212A onto 's' and 'k', which llama.cpp does not. `digits`: how many digits one piece
// takes ("{1,3}" for Llama 3; "" for Qwen2, whose pattern is otherwise Llama 3's: one digit
// a piece).
std::string llama3_pattern(const char* digits = "{1,3}") {
  return fmt::format(
      "'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\\r\\n\\p{{L}}\\p{{N}}]?\\p{{L}}+|"
      "\\p{{N}}{3}| ?[^{0}\\p{{L}}\\p{{N}}]+[\\r\\n]*|{1}*[\\r\\n]+|{1}+(?!{2})|{1}+",
      kWs, ws(), not_ws(), digits);
}

struct Stages {
  std::vector<std::string> patterns;
  bool ignore_merges = false;
};

// Name -> regex cascade, as llama.cpp groups them (llama-vocab.cpp, llm_tokenizer_bpe).
bool stages_for(const std::string& pre, Stages& out) {
  if (pre == "default") {
    out.patterns = {"[\\p{P}$+<=>^~|]+", gpt2_pattern(), "\\p{N}+", "[0-9][0-9][0-9]"};
    return true;
  }
  if (pre == "gpt2" || pre == "gpt-2" || pre == "phi-2" || pre == "mpt" || pre == "olmo" ||
      pre == "jina-es" || pre == "jina-de" || pre == "roberta-bpe") {
    out.patterns = {gpt2_pattern()};
    return true;
  }
  if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "command-r" ||
      pre == "codeshell" || pre == "exaone" || pre == "minerva-7b") {
    // Every digit on its own first, then GPT-2 inside what is left.
    out.patterns = {"\\p{N}", gpt2_pattern()};
    return true;
  }
  if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3") {
    out.patterns = {llama3_pattern()};
    out.ignore_merges = true;
    return true;
  }
  if (pre == "qwen2" || pre == "deepseek-r1-qwen" || pre == "megrez") {  // Qwen2, Qwen2.5, Qwen3
    out.patterns = {llama3_pattern("")};
    return true;
  }
  return false;
}

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};
using CodePtr = std::unique_ptr<pcre2_code, CodeDeleter>;
using MatchDataPtr = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

CodePtr compile(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw TokenizerError(fmt::format("pre-tokenizer regex does not compile at offset {}: {} ({})",
                                     err_offset, reinterpret_cast<const char*>(msg), pattern));
  }
  // JIT is an optimisation only: when unavailable pcre2_match interprets the pattern.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  return CodePtr(code);
}

using Piece = std::pair<size_t, size_t>;  // [begin, end) byte offsets

}  // namespace

struct PreTokenizer::Impl {
  std::string name;
  bool ignore_merges = false;
  std::vector<CodePtr> stages;
};

PreTokenizer::PreTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

PreTokenizer PreTokenizer::for_name(const std::string& pre) {
  Stages stages;
  if (!stages_for(pre, stages)) {
    throw TokenizerError(fmt::format(
        "unsupported pre-tokenizer tokenizer.ggml.pre = \"{}\" (supported: default, gpt2, smollm, "
        "starcoder, llama3, qwen2 and their aliases)",
        pre));
  }
  auto impl = std::make_unique<Impl>();
  impl->name = pre;
  impl->ignore_merges = stages.ignore_merges;
  for (const auto& p : stages.patterns) impl->stages.push_back(compile(p));
  return PreTokenizer(std::move(impl));
}

const std::string& PreTokenizer::name() const { return impl_->name; }
bool PreTokenizer::ignore_merges() const { return impl_->ignore_merges; }

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  // `words_text` is what llama.cpp tokenizes: the lenient decode re-encoded. `match_text` is
  // the same with surrogates (which PCRE2 refuses as invalid UTF-8) replaced by U+FFFD; both
  // are "other" for every class the patterns use and both take 3 bytes, so offsets agree.
  std::string words_text, match_text;
  words_text.reserve(text.size());
  match_text.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const uint32_t cp = utf8::decode_lenient(text, pos);
    utf8::append(words_text, cp);
    utf8::append(match_text, (cp >= 0xD800 && cp <= 0xDFFF) ? utf8::kReplacement : cp);
  }

  const auto* subject = reinterpret_cast<PCRE2_SPTR>(match_text.data());
  std::vector<Piece> pieces;
  if (!match_text.empty()) pieces.emplace_back(0, match_text.size());
  std::vector<Piece> next;
  for (const auto& code : impl_->stages) {
    MatchDataPtr md(pcre2_match_data_create_from_pattern(code.get(), nullptr));
    if (!md) throw std::bad_alloc();
    next.clear();
    next.reserve(pieces.size() * 2);
    for (const auto& [begin, end] : pieces) {
      size_t gap = begin;  // start of text not yet covered by a match
      size_t pos = begin;
      while (pos < end) {
        // The subject ends at the piece's end so that lookaheads cannot see past it.
        const int rc = pcre2_match(code.get(), subject, end, pos, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof msg);
          throw TokenizerError(fmt::format("pre-tokenizer regex match failed: {}",
                                           reinterpret_cast<const char*>(msg)));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        const size_t m_begin = ov[0], m_end = ov[1];
        if (m_end == m_begin) {  // none of our patterns can match empty; step over one char
          pos = m_end + utf8::sequence_length(static_cast<uint8_t>(match_text[m_end]));
          continue;
        }
        if (m_begin > gap) next.emplace_back(gap, m_begin);
        next.emplace_back(m_begin, m_end);
        gap = pos = m_end;
      }
      if (gap < end) next.emplace_back(gap, end);
    }
    pieces.swap(next);
  }

  std::vector<std::string> words;
  words.reserve(pieces.size());
  for (const auto& [begin, end] : pieces) words.emplace_back(words_text, begin, end - begin);
  return words;
}

}  // namespace infinipot
