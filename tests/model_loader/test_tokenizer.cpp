// Tokenizer tests. The real-model tests compare against token ids llama.cpp produced
// (tests/fixtures/tokenizer_goldens.json, made by scripts/reference/make_tokenizer_goldens.py)
// and fail, never skip, when INFINIPOT_MODEL is missing. The unit tests below them need no
// model: BPE merging order, pre-tokenizer splits, UTF-8 leniency, GGUF metadata errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model_loader/bpe.h"
#include "tests/kit/gguf_writer.h"
#include "model_loader/pretokenizer.h"
#include "model_loader/tokenizer.h"
#include "model_loader/unicode_utf8.h"
#include "tests/support/gguf_test_util.h"
#include "tests/support/tokenizer_random.h"

namespace infinipot {
namespace {

std::string source_dir() {
  if (const char* env = std::getenv("INFINIPOT_SOURCE_DIR"); env != nullptr && *env != '\0') return env;
  const std::string self = __FILE__;  // <src>/tests/model_loader/test_tokenizer.cpp
  return self.substr(0, self.rfind("/tests/"));
}

// The real model's tokenizer, loaded once; nullptr (with a recorded failure naming the
// missing model) when INFINIPOT_MODEL is unset or absent.
const Tokenizer* real_tokenizer() {
  static std::unique_ptr<Tokenizer> tok;
  if (!tok) {
    const std::string path = test::real_model_path();
    if (path.empty()) return nullptr;
    const gguf::GgufFile file = gguf::GgufFile::open(path);
    tok = std::make_unique<Tokenizer>(Tokenizer::from_gguf(file));
  }
  return tok.get();
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

struct GoldenCase {
  std::string name, text;
  bool parse_special;
  std::vector<TokenId> ids;                                   // the model as it is ("smollm")
  std::map<std::string, std::vector<TokenId>> ids_by_pre;     // same vocabulary, other pre
};

struct Goldens {
  std::string model, sha256;
  std::vector<std::string> pre_variants;
  std::vector<GoldenCase> cases;
};

Goldens load_goldens() {
  const std::string path = source_dir() + "/tests/fixtures/tokenizer_goldens.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  const auto doc = nlohmann::json::parse(in);
  Goldens g;
  g.model = doc.at("model").get<std::string>();
  g.sha256 = doc.at("model_sha256").get<std::string>();
  g.pre_variants = doc.at("pre_variants").get<std::vector<std::string>>();
  for (const auto& c : doc.at("cases")) {
    GoldenCase gc;
    gc.name = c.at("name").get<std::string>();
    gc.text = c.contains("text") ? c.at("text").get<std::string>() : from_hex(c.at("bytes_hex").get<std::string>());
    gc.parse_special = c.at("parse_special").get<bool>();
    gc.ids = c.at("ids").get<std::vector<TokenId>>();
    gc.ids_by_pre = c.at("variants").get<std::map<std::string, std::vector<TokenId>>>();
    g.cases.push_back(std::move(gc));
  }
  return g;
}

TEST(TokenizerReal, EveryGoldenCaseMatchesLlamaCpp) {
  const Tokenizer* tok = real_tokenizer();
  ASSERT_NE(tok, nullptr);
  const Goldens g = load_goldens();
  ASSERT_GE(g.cases.size(), 60u);
  int mismatches = 0;
  for (const auto& c : g.cases) {
    SCOPED_TRACE("golden case " + c.name);
    const auto ids = tok->encode(c.text, /*add_bos=*/false, c.parse_special);
    EXPECT_EQ(ids, c.ids);
    mismatches += ids != c.ids;
  }
  if (mismatches > 0) {
    ADD_FAILURE() << mismatches << " of " << g.cases.size() << " cases differ. The goldens were made from "
                  << g.model << " (sha256 " << g.sha256 << "); check INFINIPOT_MODEL is that file.";
  }
}

// The other cascades (gpt2, llama3, default) on the real vocabulary: the model's metadata is
// copied with tokenizer.ggml.pre replaced, as the golden script did for llama.cpp.
TEST(TokenizerReal, OtherPreTokenizersMatchLlamaCpp) {
  const std::string path = test::real_model_path();
  ASSERT_FALSE(path.empty());
  const gguf::GgufFile real = gguf::GgufFile::open(path);
  const Goldens g = load_goldens();
  ASSERT_FALSE(g.pre_variants.empty());
  for (const std::string& pre : g.pre_variants) {
    gguf::GgufWriter w;
    for (const auto& [key, value] : real.metadata()) w.set(key, value);
    w.replace("tokenizer.ggml.pre", gguf::value_string(pre));
    const std::vector<uint8_t> bytes = w.to_bytes();
    const auto file = gguf::GgufFile::from_memory(bytes.data(), bytes.size(), "pre=" + pre);
    const Tokenizer tok = Tokenizer::from_gguf(file);
    EXPECT_EQ(tok.pre_tokenizer(), pre);
    for (const auto& c : g.cases) {
      SCOPED_TRACE("pre " + pre + ", golden case " + c.name);
      ASSERT_EQ(c.ids_by_pre.count(pre), 1u);
      EXPECT_EQ(tok.encode(c.text, false, c.parse_special), c.ids_by_pre.at(pre));
    }
  }
}

// 12,000 random strings (mixed scripts, whitespace runs, digits, every family's special-token
// texts and near misses), half with special parsing: each token for token as llama.cpp's.
TEST(TokenizerReal, RandomStringsMatchLlamaCpp) {
  const Tokenizer* tok = real_tokenizer();
  ASSERT_NE(tok, nullptr);
  const nlohmann::json& doc = test::tokenizer_random_fixture();
  ASSERT_EQ(doc.at("cases").size(), 12000u);
  const test::RandomStringsResult r =
      test::compare_random_strings(*tok, doc.at("cases"), test::random_ids_column(doc, "smollm2"));
  EXPECT_EQ(r.same, r.rows) << r.same << " of " << r.rows << " random strings (" << r.tokens
                            << " tokens) identical; first differences:\n" << r.first_differences;
  EXPECT_GT(r.tokens, 100000u);  // the fixture really exercises the merges
}

TEST(TokenizerReal, DecodeInvertsEncodeForValidUtf8) {
  const Tokenizer* tok = real_tokenizer();
  ASSERT_NE(tok, nullptr);
  int checked = 0;
  for (const auto& c : load_goldens().cases) {
    if (!utf8::is_valid(c.text)) continue;
    SCOPED_TRACE("golden case " + c.name);
    // render_special so that parsed special tokens come back as their text.
    EXPECT_EQ(tok->decode(tok->encode(c.text, false, c.parse_special), /*render_special=*/true), c.text);
    ++checked;
  }
  EXPECT_GE(checked, 60);
}

TEST(TokenizerReal, VocabularyAndSpecialIds) {
  const Tokenizer* tok = real_tokenizer();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->n_vocab(), 49152);
  EXPECT_EQ(tok->pre_tokenizer(), "smollm");
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_EQ(tok->eot(), tok->find_token("<|im_end|>"));
  EXPECT_EQ(tok->eot(), 2);
  EXPECT_FALSE(tok->add_bos_default());
  EXPECT_TRUE(tok->is_end_of_generation(2));
  EXPECT_TRUE(tok->is_end_of_generation(0));  // <|endoftext|>, as llama.cpp's end-of-generation set
  EXPECT_FALSE(tok->is_end_of_generation(1));
  EXPECT_FALSE(tok->is_end_of_generation(-1));
  EXPECT_EQ(tok->find_token("<|im_start|>"), 1);
  EXPECT_EQ(tok->find_token("Hello"), 19556);
  EXPECT_EQ(tok->find_token("no such token"), -1);
  EXPECT_EQ(tok->token_text(216), "\xC4\xA0");  // "Ġ", the byte-level space
}

TEST(TokenizerReal, SpecialTokenParsingOnAndOff) {
  const Tokenizer* tok = real_tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::string text = "<|im_start|>user\nHi<|im_end|>";
  const auto parsed = tok->encode(text, false, /*parse_special=*/true);
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(parsed.front(), 1);
  EXPECT_EQ(parsed.back(), 2);

  const auto literal = tok->encode(text, false, /*parse_special=*/false);
  for (TokenId id : literal) EXPECT_TRUE(id != 1 && id != 2) << "special token " << id << " in literal text";
  EXPECT_GT(literal.size(), parsed.size());
  EXPECT_EQ(tok->decode(literal), text);  // plain text tokens render without render_special

  // Control tokens render only on request.
  EXPECT_EQ(tok->decode_token(1), "");
  EXPECT_EQ(tok->decode_token(1, /*render_special=*/true), "<|im_start|>");
  EXPECT_EQ(tok->decode(parsed), "user\nHi");
  EXPECT_EQ(tok->decode(parsed, true), text);
}

TEST(TokenizerReal, BosIsPrependedOnlyWhenAsked) {
  const Tokenizer* tok = real_tokenizer();
  ASSERT_NE(tok, nullptr);
  const auto without = tok->encode("Hello", /*add_bos=*/false, true);
  const auto with = tok->encode("Hello", /*add_bos=*/true, true);
  ASSERT_EQ(with.size(), without.size() + 1);
  EXPECT_EQ(with.front(), tok->bos());
  EXPECT_EQ(std::vector<TokenId>(with.begin() + 1, with.end()), without);
  EXPECT_EQ(tok->encode("", true, true), std::vector<TokenId>{tok->bos()});
  EXPECT_TRUE(tok->encode("", false, true).empty());
}

TEST(TokenizerReal, MalformedUtf8BecomesReplacementCharacters) {
  const Tokenizer* tok = real_tokenizer();
  ASSERT_NE(tok, nullptr);
  // Each byte that cannot start a complete sequence is one U+FFFD, as in llama.cpp.
  EXPECT_EQ(tok->decode(tok->encode("a\xFF" "b", false, true)), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(tok->decode(tok->encode("x\xE2\x82", false, true)), "x\xEF\xBF\xBD\xEF\xBF\xBD");
  // A 4-byte form above U+10FFFF (llama.cpp throws on it) is four replacement characters.
  EXPECT_EQ(tok->decode(tok->encode("\xF4\x90\x80\x80", false, true)),
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(TokenizerReal, DecodeTokenRejectsOutOfRangeIds) {
  const Tokenizer* tok = real_tokenizer();
  ASSERT_NE(tok, nullptr);
  EXPECT_THROW(tok->decode_token(-1), TokenizerError);
  EXPECT_THROW(tok->decode_token(tok->n_vocab()), TokenizerError);
  EXPECT_THROW(tok->decode({5, 49152}), TokenizerError);
}

TEST(TokenizerReal, FiftyThousandTokensInLinearTime) {
  const Tokenizer* tok = real_tokenizer();
  ASSERT_NE(tok, nullptr);
  // Prose from the goldens plus pseudo-words from a fixed LCG, so that BPE sees many distinct
  // words (the per-call word cache cannot do all the work).
  std::string text;
  for (const auto& c : load_goldens().cases) {
    if (utf8::is_valid(c.text)) text += c.text + "\n";
  }
  const char* syllables[] = {"ka", "lo", "mi", "tra", "ver", "sion", "ing", "qu", "ex", "ph", "ght", "on"};
  uint32_t state = 12345;
  while (text.size() < 160000) {
    text += ' ';
    for (int n = 1 + (state >> 28) % 4; n > 0; --n) {
      state = state * 1664525u + 1013904223u;
      text += syllables[(state >> 16) % 12];
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tok->encode(text, false, true);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("encoded %zu bytes into %zu tokens in %.1f ms\n", text.size(), ids.size(), seconds * 1e3);
  EXPECT_GE(ids.size(), 50000u);
  // A guard against a quadratic merge loop (minutes on this input), not a speed claim: speed
  // is measured by benchmarks, and this runs 60x slower under qemu (scripts/test-aarch64.sh)
  // or on a loaded machine (33 ms natively, 2.1 s emulated).
  EXPECT_LT(seconds, 30.0);
}

// ---- BPE merging, no model needed ----

TEST(BpeMerges, LowestRankFirstThenLeftmost) {
  const std::vector<std::string> vocab = {"a", "b", "c", "ab", "bc", "abc", "aa"};
  // "b c" outranks "a b": "abc" merges b+c first, then nothing joins a+bc.
  BpeMerges bpe(vocab, {"b c", "a b", "ab c", "a a"});
  std::vector<int32_t> out;
  bpe.encode_word("abc", out);
  EXPECT_EQ(out, (std::vector<int32_t>{0, 4}));
  // Equal pairs: the leftmost merges first.
  out.clear();
  bpe.encode_word("aaa", out);
  EXPECT_EQ(out, (std::vector<int32_t>{6, 0}));
}

TEST(BpeMerges, IntermediateOutsideVocabularyStillMerges) {
  // "xy" is not a token but "x y" and "xy z" are merges: llama.cpp merges strings, so "xyz"
  // becomes one token even though its intermediate is not in the vocabulary.
  const std::vector<std::string> vocab = {"x", "y", "z", "xyz"};
  BpeMerges bpe(vocab, {"x y", "xy z"});
  std::vector<int32_t> out;
  bpe.encode_word("xyz", out);
  EXPECT_EQ(out, (std::vector<int32_t>{3}));
  // A final symbol that is not a token falls back to single-byte tokens of its bytes.
  out.clear();
  bpe.encode_word("xy", out);
  EXPECT_EQ(out, (std::vector<int32_t>{0, 1}));
}

TEST(BpeMerges, MalformedMergeIsAnError) {
  try {
    BpeMerges bpe({"a"}, {"a b", "nospace"});
    FAIL() << "expected TokenizerError";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("merges[1]"), std::string::npos) << e.what();
  }
}

// ---- pre-tokenizer, no model needed ----

using Words = std::vector<std::string>;

TEST(PreTokenizer, SmollmSplitsDigitsThenGpt2) {
  const auto pre = PreTokenizer::for_name("smollm");
  EXPECT_EQ(pre.split("Hello world 123"), (Words{"Hello", " world", " ", "1", "2", "3"}));
  EXPECT_EQ(pre.split("it's  ok\n\nx"), (Words{"it", "'s", " ", " ok", "\n", "\n", "x"}));
  EXPECT_EQ(pre.split(""), Words{});
}

TEST(PreTokenizer, Gpt2KeepsNumbersTogether) {
  const auto pre = PreTokenizer::for_name("gpt2");
  EXPECT_EQ(pre.split("Hello world 123!!"), (Words{"Hello", " world", " 123", "!!"}));
  EXPECT_EQ(pre.split("a   b"), (Words{"a", "  ", " b"}));
}

TEST(PreTokenizer, Llama3GroupsDigitsByThree) {
  const auto pre = PreTokenizer::for_name("llama3");
  EXPECT_TRUE(pre.ignore_merges());
  EXPECT_EQ(pre.split("1234567 I'M ok.\n\n"), (Words{"123", "456", "7", " I", "'M", " ok", ".\n\n"}));
}

TEST(PreTokenizer, UnicodeWhitespaceIsLlamaCppsSet) {
  const auto pre = PreTokenizer::for_name("gpt2");
  // U+3000 is whitespace; U+180E (PCRE2's \s has it) is not.
  EXPECT_EQ(pre.split("a\xE3\x80\x80\xE3\x80\x80" "b"), (Words{"a", "\xE3\x80\x80", "\xE3\x80\x80", "b"}));
  EXPECT_EQ(pre.split("a \xE1\xA0\x8E" "b"), (Words{"a", " \xE1\xA0\x8E", "b"}));
}

TEST(PreTokenizer, UnknownNameIsAnErrorNamingIt) {
  try {
    PreTokenizer::for_name("qwen9");
    FAIL() << "expected TokenizerError";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("\"qwen9\""), std::string::npos) << e.what();
  }
}

TEST(PreTokenizer, MalformedUtf8IsReplacedNotRejected) {
  const auto pre = PreTokenizer::for_name("gpt2");
  // Two bad bytes -> two U+FFFD (a symbol run); a surrogate survives as its 3 bytes.
  EXPECT_EQ(pre.split("a\x80\xFF"), (Words{"a", "\xEF\xBF\xBD\xEF\xBF\xBD"}));
  EXPECT_EQ(pre.split("\xED\xA0\x80"), (Words{"\xED\xA0\x80"}));
}

// ---- UTF-8 helpers ----

TEST(Utf8, LenientDecodeFollowsLlamaCpp) {
  auto decode_all = [](const std::string& s) {
    std::vector<uint32_t> cps;
    for (size_t pos = 0; pos < s.size();) cps.push_back(utf8::decode_lenient(s, pos));
    return cps;
  };
  EXPECT_EQ(decode_all("a\xC3\xA9"), (std::vector<uint32_t>{'a', 0xE9}));
  EXPECT_EQ(decode_all("\xC0\x80"), (std::vector<uint32_t>{0}));               // overlong accepted
  EXPECT_EQ(decode_all("\xED\xA0\x80"), (std::vector<uint32_t>{0xD800}));      // surrogate accepted
  EXPECT_EQ(decode_all("\xE2\x82"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));  // truncated
  EXPECT_EQ(decode_all("\xF8\x80"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
  EXPECT_TRUE(utf8::is_valid("caf\xC3\xA9 \xF0\x9F\x98\x80 \xEF\xBF\xBD"));
  EXPECT_FALSE(utf8::is_valid("\xC0\x80"));
  EXPECT_FALSE(utf8::is_valid("\xED\xA0\x80"));
  EXPECT_FALSE(utf8::is_valid("\xEF\xBF"));
}

TEST(Utf8, ByteAlphabetIsGpt2s) {
  const auto& a = utf8::ByteAlphabet::get();
  EXPECT_EQ(a.encode(' '), "\xC4\xA0");   // Ġ
  EXPECT_EQ(a.encode('\n'), "\xC4\x8A");  // Ċ
  EXPECT_EQ(a.encode('A'), "A");
  EXPECT_EQ(a.encode(0xAD), "\xC5\x83");  // the last shifted byte, U+0143
  for (int b = 0; b < 256; ++b) {
    std::string text = a.encode(static_cast<uint8_t>(b));
    size_t pos = 0;
    EXPECT_EQ(a.decode(utf8::decode_lenient(text, pos)), b);
  }
  EXPECT_EQ(a.decode(' '), -1);
}

// ---- GGUF metadata errors, no model needed ----

std::vector<uint8_t> gguf_with_strings(std::initializer_list<std::pair<std::string, std::string>> kvs) {
  test::RawGguf g;
  g.header(3, 0, kvs.size());
  for (const auto& [k, v] : kvs) g.kv_string(k, v);
  return g.bytes();
}

void expect_tokenizer_error(const std::vector<uint8_t>& bytes, const std::string& needle) {
  const auto file = gguf::GgufFile::from_memory(bytes.data(), bytes.size());
  try {
    Tokenizer::from_gguf(file);
    ADD_FAILURE() << "expected TokenizerError containing " << needle;
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TokenizerMetadata, UnsupportedModelAndPreAreNamed) {
  expect_tokenizer_error(gguf_with_strings({{"tokenizer.ggml.model", "bert"}}), "\"bert\"");
  expect_tokenizer_error(gguf_with_strings({{"tokenizer.ggml.model", "llama"}}), "missing tokenizer.ggml.tokens");
  gguf::GgufWriter w;
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "bogus-pre");
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
  expect_tokenizer_error(w.to_bytes(), "\"bogus-pre\"");
  expect_tokenizer_error(gguf_with_strings({{"general.name", "x"}}), "tokenizer.ggml.model");
}

}  // namespace
}  // namespace infinipot
