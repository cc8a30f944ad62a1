// Which tokens the pot keeps or drops together (pot/word_runs.h), on token texts as SmolLM2's
// tokenizer splits them.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "pot/word_runs.h"

namespace infinipot {
namespace {

// The run each token belongs to, as the index of the run's first token (MemoryPot's loop).
std::vector<int> runs(const std::vector<std::string>& tokens, UnitRule rule) {
  std::vector<int> start(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int at = static_cast<int>(i);
    start[i] = i > 0 ? run_start(token_edges(tokens[i - 1]), token_edges(tokens[i]), rule, start[i - 1], at) : at;
  }
  return start;
}

TEST(WordRuns, EdgesOfTokenTexts) {
  EXPECT_EQ(token_edges("8"), kStartsWord | kEndsWord);
  EXPECT_EQ(token_edges(" Remember"), kEndsWord);
  EXPECT_EQ(token_edges("."), kStartsPunct | kOnlyPunct);
  EXPECT_EQ(token_edges("-"), kStartsPunct | kOnlyPunct);
  EXPECT_EQ(token_edges("<|im_end|>"), kStartsPunct);  // letters inside: not only marks
  EXPECT_EQ(token_edges(".\""), kStartsPunct | kOnlyPunct);
  EXPECT_EQ(token_edges(" "), kOnlySpaces);
  EXPECT_EQ(token_edges("   "), kOnlySpaces);
  EXPECT_EQ(token_edges("\n"), 0);
  EXPECT_EQ(token_edges(" \n"), 0);
  EXPECT_EQ(token_edges(""), 0);
  EXPECT_EQ(token_edges("\xc3\xa9t\xc3\xa9"), kStartsWord | kEndsWord);  // "été": non-ASCII is a letter
  EXPECT_EQ(token_edges("s,"), kStartsWord);
}

// " is 82636. Remember it. 82636 is the pass key." as SmolLM2 writes it.
const std::vector<std::string> kNeedle = {" is", " ", "8", "2", "6", "3", "6", ".", " Remember", " it", ".",
                                          " ", "8", "2", "6", "3", "6", " is", " the", " pass", " key", "."};

TEST(WordRuns, ANumberCarriesItsSpaceAndTheMarkAfterIt) {
  const std::vector<int> expect = {0, 1, 1, 1, 1, 1, 1, 1, 8, 9, 9, 11, 11, 11, 11, 11, 11, 17, 18, 19, 20, 20};
  EXPECT_EQ(runs(kNeedle, UnitRule::Word), expect);
  EXPECT_EQ(runs(kNeedle, UnitRule::Plain), expect) << "no mark inside a word here";
}

TEST(WordRuns, AlnumRunsAreLettersAndDigitsOnly) {
  const std::vector<int> expect = {0, 1, 2, 2, 2, 2, 2, 7, 8, 9, 10, 11, 12, 12, 12, 12, 12, 17, 18, 19, 20, 21};
  EXPECT_EQ(runs(kNeedle, UnitRule::Alnum), expect);
}

TEST(WordRuns, SplitWordsJoinButSpacesAndNewlinesSeparate) {
  // " Rem" "ember" is one word; "\n" never joins; a word after a space token joins it only
  // when that token is nothing but spaces; punctuation after punctuation starts a new run.
  const std::vector<std::string> t = {" Rem", "ember", ",", "\n", "Cain", " ", "said", ".", "\"", "\n\n", "2026", "-", "11"};
  const std::vector<int> plain = {0, 0, 0, 3, 4, 5, 5, 5, 8, 9, 10, 10, 12};
  EXPECT_EQ(runs(t, UnitRule::Plain), plain);
  // Word: the date goes on through its mark ("11" joins "2026-").
  std::vector<int> word = plain;
  word.back() = 10;
  EXPECT_EQ(runs(t, UnitRule::Word), word);
}

// A uuid as SmolLM2 writes it: " da" "3" "d" "5" "ed" "3" "-" "df" "8" "9" "-" ...: one run
// under the default rule, five under plain (each mark ends one, the next group starts anew);
// a mark after a mark, or after a space, still starts a new run; token: one run per token.
TEST(WordRuns, MarksInsideAWordContinueItsRun) {
  const std::vector<std::string> uuid = {" is", ":", " da", "3", "d", "5", "ed", "3", "-", "df", "8", "9", "-", "4", "2",
                                         "e", "2", "-", "8", "a", "2", "1", "-", "2", "4", "4", "5", "a", ".", " Next"};
  const std::vector<int> word = runs(uuid, UnitRule::Word);
  for (size_t i = 2; i + 1 < uuid.size(); ++i) EXPECT_EQ(word[i], 2) << "token " << i << " '" << uuid[i] << "'";
  EXPECT_EQ(word[1], 0) << "the colon closes \" is\"";
  EXPECT_EQ(word.back(), static_cast<int>(uuid.size()) - 1);
  const std::vector<int> plain = runs(uuid, UnitRule::Plain);
  EXPECT_EQ(std::set<int>(plain.begin() + 2, plain.end() - 1), (std::set<int>{2, 9, 13, 18, 23}));
  // "a - b" (spaced), "--" then a word, and a mark opening a text keep their runs apart.
  const std::vector<std::string> apart = {" a", " -", " b", "\n", "\"", "Hello", "x", "--", "y"};
  const std::vector<int> expect = {0, 1, 2, 3, 4, 5, 5, 5, 5};
  EXPECT_EQ(runs(apart, UnitRule::Word), expect);
  const std::vector<int> tokens = runs(apart, UnitRule::Token);
  for (size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(tokens[i], static_cast<int>(i));
}

// Text without spaces is not one unit: a run stops at kMaxRunTokens tokens and the next token
// starts another, through marks (CSV, minified code) and through letters alike (Chinese prose,
// base64), under every rule that joins tokens.
std::map<int, int> run_sizes(const std::vector<std::string>& tokens, UnitRule rule) {
  std::map<int, int> sizes;
  for (int s : runs(tokens, rule)) ++sizes[s];
  return sizes;
}

TEST(WordRuns, RunsAreBounded) {
  std::vector<std::string> csv;
  for (int i = 0; i < 100; ++i) csv.insert(csv.end(), {std::to_string(i % 10), ","});
  // Chinese prose: every token (here U+5B83) starts and ends with a non-ASCII byte.
  std::vector<std::string> hanzi(130, "\xe5\xae\x83");
  std::vector<std::string> base64;
  for (int i = 0; i < 130; ++i) base64.push_back(i % 2 ? "Qx" : "9z");
  struct Case {
    const char* name;
    const std::vector<std::string>& tokens;
    UnitRule rule;
  };
  for (const Case& c : {Case{"csv", csv, UnitRule::Word}, Case{"hanzi", hanzi, UnitRule::Word},
                        Case{"hanzi", hanzi, UnitRule::Plain}, Case{"base64", base64, UnitRule::Alnum}}) {
    SCOPED_TRACE(std::string(c.name) + " " + unit_rule_name(c.rule));
    const std::map<int, int> sizes = run_sizes(c.tokens, c.rule);
    EXPECT_GT(sizes.size(), 1u);
    for (const auto& [start, n] : sizes) EXPECT_LE(n, kMaxRunTokens) << "run at " << start;
    EXPECT_EQ(sizes.begin()->second, kMaxRunTokens) << "a run stops at the bound, not before";
  }
  EXPECT_EQ(run_sizes(hanzi, UnitRule::Token).size(), hanzi.size());
}

TEST(WordRuns, RuleNamesRoundTrip) {
  for (const UnitRule r : {UnitRule::Word, UnitRule::Plain, UnitRule::Alnum, UnitRule::Token})
    EXPECT_EQ(parse_unit_rule(unit_rule_name(r)), r);
  EXPECT_FALSE(parse_unit_rule("words").has_value());
}

}  // namespace
}  // namespace infinipot
