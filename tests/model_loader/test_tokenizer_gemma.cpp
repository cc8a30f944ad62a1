// SentencePiece tokenizer tests. The Gemma 3 tests compare against token ids llama.cpp
// produced (tests/fixtures/gemma3_tokenizer_goldens.json: named cases;
// gemma3_tokenizer_random.json: 12,000 random strings; both made by
// scripts/reference/make_gemma_tokenizer_goldens.py) and fail, never skip, when the Gemma model
// is missing. The unit tests below them build small SentencePiece vocabularies in memory.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "tests/kit/gguf_writer.h"
#include "model_loader/spm.h"
#include "model_loader/tokenizer.h"
#include "model_loader/unicode_utf8.h"
#include "tests/support/gguf_test_util.h"
#include "tests/support/tokenizer_random.h"

namespace infinipot {
namespace {

const Tokenizer* gemma_tokenizer() {
  static std::unique_ptr<Tokenizer> tok;
  if (!tok) {
    const std::string path = test::gemma_model_path();
    if (path.empty()) return nullptr;
    const gguf::GgufFile file = gguf::GgufFile::open(path);
    tok = std::make_unique<Tokenizer>(Tokenizer::from_gguf(file));
  }
  return tok.get();
}

nlohmann::json load_fixture(const std::string& name) {
  const std::string path = std::string(INFINIPOT_TEST_SOURCE_DIR) + "/tests/fixtures/" + name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path + " (made by scripts/reference/make_gemma_tokenizer_goldens.py)");
  return nlohmann::json::parse(in);
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

TEST(GemmaTokenizer, EveryGoldenCaseMatchesLlamaCpp) {
  const Tokenizer* tok = gemma_tokenizer();
  ASSERT_NE(tok, nullptr);
  const nlohmann::json doc = load_fixture("gemma3_tokenizer_goldens.json");
  const auto& cases = doc.at("cases");
  ASSERT_GE(cases.size(), 110u);
  int id_mismatches = 0, text_mismatches = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE("golden case " + c.at("name").get<std::string>());
    const std::string text = c.contains("text") ? c.at("text").get<std::string>()
                                                : from_hex(c.at("bytes_hex").get<std::string>());
    const auto want = c.at("ids").get<std::vector<TokenId>>();
    const auto ids = tok->encode(text, c.at("add_bos").get<bool>(), c.at("parse_special").get<bool>());
    EXPECT_EQ(ids, want);
    id_mismatches += ids != want;
    // llama.cpp's detokenization of its own ids, byte for byte where it was not valid UTF-8.
    const std::string decoded = c.contains("decoded_hex") ? from_hex(c.at("decoded_hex").get<std::string>())
                                                          : c.at("decoded").get<std::string>();
    EXPECT_EQ(tok->decode(want), decoded);
    text_mismatches += tok->decode(want) != decoded;
  }
  if (id_mismatches + text_mismatches > 0) {
    ADD_FAILURE() << id_mismatches << " of " << cases.size() << " cases tokenize differently and " << text_mismatches
                  << " decode differently. The goldens were made from " << doc.at("model") << " (sha256 "
                  << doc.at("model_sha256") << ").";
  }
}

// 12,000 random strings (mixed scripts, whitespace runs, special-token texts, code points only
// byte fallback spells), half with special parsing: every one token for token.
TEST(GemmaTokenizer, RandomStringsMatchLlamaCpp) {
  const Tokenizer* tok = gemma_tokenizer();
  ASSERT_NE(tok, nullptr);
  const nlohmann::json doc = load_fixture("gemma3_tokenizer_random.json");
  ASSERT_EQ(doc.at("cases").size(), 12000u);
  ASSERT_EQ(doc.at("count"), 12000);
  const test::RandomStringsResult r = test::compare_random_strings(*tok, doc.at("cases"), 2);
  EXPECT_EQ(r.same, r.rows) << r.same << " of " << r.rows << " random strings (" << r.tokens
                            << " tokens) identical; first differences:\n" << r.first_differences;
  EXPECT_GT(r.tokens, 100000u);  // the fixture really exercises the merges
}

TEST(GemmaTokenizer, VocabularyAndSpecialIds) {
  const Tokenizer* tok = gemma_tokenizer();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->n_vocab(), 262144);
  EXPECT_EQ(tok->bos(), 2);
  EXPECT_EQ(tok->eos(), 1);
  EXPECT_EQ(tok->find_token("<end_of_turn>"), 106);
  EXPECT_EQ(tok->eot(), 106);
  EXPECT_TRUE(tok->is_end_of_generation(1));
  EXPECT_TRUE(tok->is_end_of_generation(106));
  EXPECT_FALSE(tok->is_end_of_generation(105));
  EXPECT_TRUE(tok->add_bos_default());
  EXPECT_EQ(tok->token_text(105), "<start_of_turn>");
  EXPECT_EQ(tok->decode_token(105), "");  // control: hidden unless rendered
  EXPECT_EQ(tok->decode_token(105, true), "<start_of_turn>");
  EXPECT_EQ(tok->decode_token(107), "\n");  // user-defined: always shown
  EXPECT_EQ(tok->token_text(238), "<0x00>");
  EXPECT_EQ(tok->decode_token(238 + 0x41), "A");  // byte token
  EXPECT_EQ(tok->decode(tok->encode("Hello world", true, false)), "Hello world");
}

TEST(GemmaTokenizer, DecodeInvertsEncodeForValidUtf8) {
  const Tokenizer* tok = gemma_tokenizer();
  ASSERT_NE(tok, nullptr);
  int checked = 0;
  const nlohmann::json doc = load_fixture("gemma3_tokenizer_goldens.json");
  for (const auto& c : doc.at("cases")) {
    if (!c.contains("text") || !c.at("parse_special").get<bool>()) continue;
    const std::string text = c.at("text").get<std::string>();
    if (text.find("\xe2\x96\x81") != std::string::npos) continue;  // a literal "▁" decodes as a space
    SCOPED_TRACE("golden case " + c.at("name").get<std::string>());
    EXPECT_EQ(tok->decode(tok->encode(text, false, true), /*render_special=*/true), text);
    ++checked;
  }
  EXPECT_GE(checked, 90);
}

TEST(GemmaTokenizer, FiftyThousandTokensInLinearTime) {
  const Tokenizer* tok = gemma_tokenizer();
  ASSERT_NE(tok, nullptr);
  std::string text;
  for (int i = 0; text.size() < 250000; ++i) {
    text += "Sentence " + std::to_string(i) + ": the pot keeps what matters, and 我爱自然语言 too.\n";
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto ids = tok->encode(text, false, false);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(ids.size(), 50000u);
  // A guard against a quadratic merge loop (minutes on this input), not a speed claim: speed
  // is measured by benchmarks, and emulation (scripts/test-aarch64.sh), sanitizers or a loaded
  // machine make this many times slower.
  EXPECT_LT(s, 30.0) << ids.size() << " tokens in " << s << " s";
}

// ---- small in-memory SentencePiece vocabularies, no model needed ----

// Ids 0..2 <unk> <s> </s> (control), then 256 byte tokens, then `pieces` with their scores.
gguf::GgufWriter spm_vocab(const std::vector<std::pair<std::string, float>>& pieces) {
  std::vector<std::string> texts = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  std::vector<float> scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    texts.push_back(buf);
    types.push_back(6);
    scores.push_back(0);
  }
  for (const auto& [text, score] : pieces) {
    texts.push_back(text);
    types.push_back(1);
    scores.push_back(score);
  }
  gguf::GgufWriter w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens", texts);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_f32_array("tokenizer.ggml.scores", scores);
  return w;
}

struct SmallSpm {
  std::vector<uint8_t> bytes;
  Tokenizer tok;
};

SmallSpm small_spm(gguf::GgufWriter w) {
  std::vector<uint8_t> bytes = w.to_bytes();
  const auto file = gguf::GgufFile::from_memory(bytes.data(), bytes.size(), "spm.gguf");
  Tokenizer tok = Tokenizer::from_gguf(file);
  return SmallSpm{std::move(bytes), std::move(tok)};
}

constexpr TokenId kFirstPiece = 3 + 256;

TEST(SpmMerging, HighestScoreFirstThenLeftmost) {
  // "ab" outscores "bc", so "abc" -> "ab" + "c"; with "bc" higher it is "a" + "bc".
  const std::vector<std::pair<std::string, float>> pieces = {{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -2}, {"bc", -3}};
  gguf::GgufWriter w = spm_vocab(pieces);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  SmallSpm s = small_spm(std::move(w));
  EXPECT_EQ(s.tok.encode("abc", false, false), (std::vector<TokenId>{kFirstPiece + 3, kFirstPiece + 2}));
  gguf::GgufWriter w2 = spm_vocab({{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -3}, {"bc", -2}});
  w2.set_bool("tokenizer.ggml.add_space_prefix", false);
  SmallSpm s2 = small_spm(std::move(w2));
  EXPECT_EQ(s2.tok.encode("abc", false, false), (std::vector<TokenId>{kFirstPiece, kFirstPiece + 4}));
  // Equal scores: the leftmost pair merges first ("aa" + "a", not "a" + "aa").
  gguf::GgufWriter w3 = spm_vocab({{"a", -1}, {"aa", -2}});
  w3.set_bool("tokenizer.ggml.add_space_prefix", false);
  SmallSpm s3 = small_spm(std::move(w3));
  EXPECT_EQ(s3.tok.encode("aaa", false, false), (std::vector<TokenId>{kFirstPiece + 1, kFirstPiece}));
}

TEST(SpmMerging, StaleCandidatesAreSkippedAndMergesChain) {
  // "abcd": "bc" (-1) merges first, which makes the older "ab" and "cd" stale; then "abcd"
  // needs "a"+"bc" -> "abc" (-2) and "abc"+"d" -> "abcd" (-3).
  gguf::GgufWriter w = spm_vocab(
      {{"a", -9}, {"b", -9}, {"c", -9}, {"d", -9}, {"ab", -5}, {"cd", -5}, {"bc", -1}, {"abc", -2}, {"abcd", -3}});
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  SmallSpm s = small_spm(std::move(w));
  EXPECT_EQ(s.tok.encode("abcd", false, false), (std::vector<TokenId>{kFirstPiece + 8}));
}

TEST(SpmMerging, UnknownCharactersFallBackToBytes) {
  gguf::GgufWriter w = spm_vocab({{"a", -1}});
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  SmallSpm s = small_spm(std::move(w));
  // "é" is not a piece: its two UTF-8 bytes become <0xC3> <0xA9>; decoding gives it back.
  const auto ids = s.tok.encode("a\xc3\xa9", false, false);
  EXPECT_EQ(ids, (std::vector<TokenId>{kFirstPiece, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(s.tok.decode(ids), "a\xc3\xa9");
  // Malformed UTF-8 is kept byte for byte: a lead byte takes the bytes its length announces,
  // so the "a"s after it are spelled as bytes too (as llama.cpp does), unless past its reach.
  EXPECT_EQ(s.tok.encode("\xf8" "a", false, false), (std::vector<TokenId>{3 + 0xF8, 3 + 'a'}));
  EXPECT_EQ(s.tok.encode("\xe2" "aaa", false, false), (std::vector<TokenId>{3 + 0xE2, 3 + 'a', 3 + 'a', kFirstPiece}));
  EXPECT_EQ(s.tok.encode("\x80" "a", false, false), (std::vector<TokenId>{3 + 0x80, kFirstPiece}));
}

TEST(SpmMerging, SpacePrefixAndEscaping) {
  const std::vector<std::pair<std::string, float>> pieces = {
      {"\xe2\x96\x81", -1}, {"h", -1}, {"i", -1}, {"\xe2\x96\x81h", -2}, {"\xe2\x96\x81hi", -3}, {"hi", -4}};
  const TokenId space = kFirstPiece, spaced_hi = kFirstPiece + 4, hi = kFirstPiece + 5;
  // Default (key absent): the prefix space is added, as llama.cpp does for SentencePiece, and
  // decode takes it off again.
  SmallSpm with = small_spm(spm_vocab(pieces));
  EXPECT_EQ(with.tok.encode("hi", false, false), (std::vector<TokenId>{spaced_hi}));
  EXPECT_EQ(with.tok.encode("hi hi", false, false), (std::vector<TokenId>{spaced_hi, spaced_hi}));
  EXPECT_EQ(with.tok.decode({spaced_hi, spaced_hi}), "hi hi");
  EXPECT_EQ(with.tok.bos(), 1);  // llama.cpp's SentencePiece defaults when the keys are absent
  EXPECT_EQ(with.tok.eos(), 2);
  EXPECT_TRUE(with.tok.add_bos_default());
  // After a special token, the next raw fragment gets the prefix again.
  EXPECT_EQ(with.tok.encode("hi</s>hi", false, true), (std::vector<TokenId>{spaced_hi, 2, spaced_hi}));
  gguf::GgufWriter w = spm_vocab(pieces);
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  SmallSpm without = small_spm(std::move(w));
  EXPECT_EQ(without.tok.encode("hi", false, false), (std::vector<TokenId>{hi}));
  EXPECT_EQ(without.tok.encode(" hi", false, false), (std::vector<TokenId>{spaced_hi}));
  EXPECT_EQ(without.tok.encode("  ", false, false), (std::vector<TokenId>{space, space}));
  EXPECT_EQ(without.tok.decode({space, spaced_hi}), "  hi");
  // Control-token text stays text without special parsing.
  EXPECT_EQ(without.tok.encode("</s>", false, false).size(), 4u);  // bytes of '<', '/', 's', '>'
  EXPECT_EQ(without.tok.encode("</s>", true, true), (std::vector<TokenId>{1, 2}));
}

// A prompt tokenized in parts (the engine's prefix, document, question, tail) adds up to the
// whole text's encoding when each part after the first is encoded as a continuation: the
// space prefix goes at the start of the text and after special tokens, not at every seam.
TEST(SpmMerging, ContinuationsAddNoSpacePrefixAtTheirStart) {
  const std::vector<std::pair<std::string, float>> pieces = {
      {"\xe2\x96\x81", -1}, {"h", -1}, {"i", -1}, {"\xe2\x96\x81h", -2}, {"\xe2\x96\x81hi", -3}, {"hi", -4}};
  const TokenId spaced_hi = kFirstPiece + 4, hi = kFirstPiece + 5;
  SmallSpm with = small_spm(spm_vocab(pieces));
  EXPECT_EQ(with.tok.encode_continuation("hi", false), (std::vector<TokenId>{hi}));
  EXPECT_EQ(with.tok.encode_continuation("hi hi", false), (std::vector<TokenId>{hi, spaced_hi}));
  EXPECT_EQ(with.tok.encode_continuation("hi</s>hi", true), (std::vector<TokenId>{hi, 2, spaced_hi}));
  // "hi" + "hi</s>hi" in two parts equals "hihi</s>hi" whole, seam for seam.
  std::vector<TokenId> parts = with.tok.encode("hi", false, true);
  const std::vector<TokenId> rest = with.tok.encode_continuation("hi</s>hi", true);
  parts.insert(parts.end(), rest.begin(), rest.end());
  EXPECT_EQ(parts, with.tok.encode("hihi</s>hi", false, true));
  EXPECT_EQ(parts, (std::vector<TokenId>{spaced_hi, hi, 2, spaced_hi}));
  // Where a part starts after a special token, the engine encodes it as a text of its own.
  EXPECT_TRUE(with.tok.ends_with_special_token("hi</s>"));
  EXPECT_TRUE(with.tok.ends_with_special_token(""));
  EXPECT_FALSE(with.tok.ends_with_special_token("</s>hi"));
  EXPECT_FALSE(with.tok.ends_with_special_token("hi"));
}

TEST(SpmMerging, ScoresMustMatchTheVocabulary) {
  gguf::GgufWriter w = spm_vocab({{"a", -1}});
  w.erase("tokenizer.ggml.scores");
  w.set_f32_array("tokenizer.ggml.scores", {0.f, 1.f});
  std::vector<uint8_t> bytes = w.to_bytes();
  const auto file = gguf::GgufFile::from_memory(bytes.data(), bytes.size());
  try {
    Tokenizer::from_gguf(file);
    FAIL() << "expected a TokenizerError";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.scores has 2 entries for 260 tokens"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace infinipot
