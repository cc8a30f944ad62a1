// Which tokens the pot keeps or drops together (pot/word_runs.h), on token texts as SmolLM2's
// tokenizer splits them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pot/word_runs.h"

namespace infinipot {
namespace {

// The run each token belongs to, as the index of the run's first token (MemoryPot's loop).
std::vector<int> runs(const std::vector<std::string>& tokens, bool alnum_only) {
  std::vector<int> start(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool joins = i > 0 && joins_run(token_edges(tokens[i - 1]), token_edges(tokens[i]), alnum_only);
    start[i] = joins ? start[i - 1] : static_cast<int>(i);
  }
  return start;
}

TEST(WordRuns, EdgesOfTokenTexts) {
  EXPECT_EQ(token_edges("8"), kStartsWord | kEndsWord);
  EXPECT_EQ(token_edges(" Remember"), kEndsWord);
  EXPECT_EQ(token_edges("."), kStartsPunct);
  EXPECT_EQ(token_edges(".\""), kStartsPunct);
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
  EXPECT_EQ(runs(kNeedle, false), expect);
}

TEST(WordRuns, AlnumRunsAreLettersAndDigitsOnly) {
  const std::vector<int> expect = {0, 1, 2, 2, 2, 2, 2, 7, 8, 9, 10, 11, 12, 12, 12, 12, 12, 17, 18, 19, 20, 21};
  EXPECT_EQ(runs(kNeedle, true), expect);
}

TEST(WordRuns, SplitWordsJoinButSpacesAndNewlinesSeparate) {
  // " Rem" "ember" is one word; "\n" never joins; a word after a space token joins it only
  // when that token is nothing but spaces; punctuation after punctuation starts a new run.
  const std::vector<std::string> t = {" Rem", "ember", ",", "\n", "Cain", " ", "said", ".", "\"", "\n\n", "2026", "-", "11"};
  const std::vector<int> expect = {0, 0, 0, 3, 4, 5, 5, 5, 8, 9, 10, 10, 12};
  EXPECT_EQ(runs(t, false), expect);
}

}  // namespace
}  // namespace infinipot
