// The default word runs (pot/word_runs.h, `units=word`) continue through a mark inside a word;
// until 2026-11-26 such a mark ended the run (`units=plain`), and since later that day no run
// grows past kMaxRunTokens tokens (before, only runs through marks were bounded). A pot's
// choices depend on its units and nothing else of the rules, so a trial whose prompt has no
// token where the rules differ ends with the same pot under either. These tests check that
// for the documents of the committed result tables (docs/results.md, docs/models.md: seed 1,
// the passkey task): no token is in another run under word than under plain, and no run
// reaches the bound. That is why their rows, measured under the older rules, stand for the
// default; and they show that the rules do differ on a uuid needle, which the change is for.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/nih.h"
#include "engine/tasks/task_registry.h"
#include "model_loader/gguf.h"
#include "model_loader/tokenizer.h"
#include "pot/word_runs.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  if (path.empty()) return nullptr;
  return std::make_unique<Tokenizer>(Tokenizer::from_gguf(gguf::GgufFile::open(path)));
}

// Over the tokens of some texts: how many are in another run under the two rules, and the
// longest run under the default.
struct RunCheck {
  int differences = 0;
  int longest = 0;
  void add(const Tokenizer& tok, const std::string& text) {
    const std::vector<TokenId> ids = tok.encode(text, false, false);
    int word = -1, plain = -1;  // the run start of the token before, per rule
    for (size_t i = 0; i < ids.size(); ++i) {
      const int at = static_cast<int>(i);
      const unsigned char cur = token_edges(tok.decode_token(ids[i]));
      const unsigned char prev = i > 0 ? token_edges(tok.decode_token(ids[i - 1])) : 0;
      word = i > 0 ? run_start(prev, cur, UnitRule::Word, word, at) : at;
      plain = i > 0 ? run_start(prev, cur, UnitRule::Plain, plain, at) : at;
      differences += word != plain;
      longest = std::max(longest, at - word + 1);
    }
  }
};

nih::Haystack haystack(const std::string& name) {
  if (name == "passkey") return nih::passkey_haystack();
  std::ifstream in(std::string(INFINIPOT_TEST_SOURCE_DIR) + "/data/perplexity.txt");
  std::stringstream ss;
  ss << in.rdbuf();
  return nih::prose_haystack(name, ss.str());
}

// Every passkey trial of (haystack, lengths, depths, trials) with seed 1: documents and question.
RunCheck check_tables(const Tokenizer& tok, const std::string& hay, const std::vector<int>& lengths,
                      const std::vector<double>& depths, int trials) {
  nih::DocumentBuilder docs(haystack(hay), [&](const std::string& s) {
    return static_cast<int>(tok.encode(s, false, false).size());
  });
  const nih::Task& task = nih::find_task("passkey");
  RunCheck check;
  for (int length : lengths)
    for (double depth : depths)
      for (int t = 0; t < trials; ++t) {
        const nih::Trial tr = task.make({1, hay, length, depth, t}, docs);
        check.add(tok, tr.doc.text);
        check.add(tok, tr.question);
      }
  return check;
}

TEST(WordRunsOnDocuments, SmolLM2TablesReadTheSameRunsUnderBothRules) {
  const auto tok = load_tokenizer(test::real_model_path());
  ASSERT_TRUE(tok);
  for (const char* hay : {"passkey", "prose"}) {
    const RunCheck c = check_tables(*tok, hay, {4096, 8192, 16384, 32768}, {0.1, 0.5, 0.9}, 5);
    EXPECT_EQ(c.differences, 0) << hay;
    EXPECT_LT(c.longest, kMaxRunTokens) << hay;
  }
  // What the rule is for: a uuid is one run under word, five under plain.
  RunCheck uuid;
  uuid.add(*tok, "The special magic uuid is: da3d5ed3-df89-42e2-8a21-24456680226a.");
  EXPECT_GT(uuid.differences, 0);
}

TEST(WordRunsOnDocuments, GemmaTablesReadTheSameRunsUnderBothRules) {
  const auto tok = load_tokenizer(test::gemma_model_path());
  ASSERT_TRUE(tok);
  const RunCheck passkey = check_tables(*tok, "passkey", {4096, 8192, 16384, 32768, 65536}, {0.25, 0.5, 0.75}, 4);
  EXPECT_EQ(passkey.differences, 0);
  EXPECT_LT(passkey.longest, kMaxRunTokens);
  // The prose rows (units=plain) differ from word, but no run there reaches the bound either.
  EXPECT_LT(check_tables(*tok, "prose", {4096, 8192}, {0.25, 0.5, 0.75}, 4).longest, kMaxRunTokens);
}

}  // namespace
}  // namespace infinipot
