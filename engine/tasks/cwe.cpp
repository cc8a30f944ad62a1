// cwe (common words extraction): the document is a comma-separated list of words of the
// built-in list in which five words appear ten times as often as each of the others (at
// least 30 times, and at most half the list); asked for the five most common. No haystack
// and no needle: the haystack and depth only vary the seed of the list. The score is the
// share of the five in the answer.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/tasks/task_registry.h"

namespace infinipot::nih {
namespace {

constexpr int kCommon = 5;
constexpr int kRareMin = 3;  // times each other word appears, at least
const char* const kIntro =
    "Below is a long list of words separated by commas. A few words appear far more often than all the others.";

class CweTask : public Task {
 public:
  const char* name() const override { return "cwe"; }
  const char* summary() const override {
    return "common words extraction: a word list (no haystack) where 5 words are 10x as frequent; share of the 5";
  }
  const char* headline() const override { return "all 5 common words found"; }
  ValueKind kind() const override { return ValueKind::Word; }
  Rule rule() const override { return Rule::All; }
  int default_n_predict() const override { return 32; }
  Trial make(const TrialSpec& t, DocumentBuilder& docs) const override {
    TrialRng shuffled(name(), t);
    std::vector<std::string> words = word_list();
    for (size_t i = words.size() - 1; i > 0; --i) std::swap(words[i], words[shuffled.below(i + 1)]);
    const std::vector<std::string> common(words.begin(), words.begin() + kCommon);
    // The list of n entries; the same n always gives the same text.
    auto build = [&](long n) {
      TrialRng rng = shuffled;
      const long rare_words = static_cast<long>(words.size()) - kCommon;
      const long rare = std::max<long>(kRareMin, (n + 10 * kCommon + rare_words - 1) / (10 * kCommon + rare_words));
      const long often = std::max(rare + 2, std::min(10 * rare, n / (2 * kCommon)));
      std::vector<const std::string*> list;
      for (int c = 0; c < kCommon; ++c) list.insert(list.end(), often, &words[c]);
      for (size_t w = kCommon; w < words.size() && static_cast<long>(list.size()) < n; ++w)
        list.insert(list.end(), std::min(rare, n - static_cast<long>(list.size())), &words[w]);
      for (size_t i = list.size() - 1; i > 0; --i) std::swap(list[i], list[rng.below(i + 1)]);
      std::string s = std::string(kIntro) + "\n\n";
      for (size_t i = 0; i < list.size(); ++i) s += (i ? ", " : "") + *list[i];
      return s + ".";
    };
    // Entries for the length: a guess, measured, corrected in proportion (a few counts).
    const int tol = std::max(1, t.length / 100);
    const int intro = docs.tokens(std::string(kIntro) + "\n\n.");
    long n = std::max<long>(kCommon * (kRareMin + 2), (t.length - intro) / 2);
    Document best;
    int best_off = std::numeric_limits<int>::max();
    for (int iter = 0; iter < 6; ++iter) {
      Document d;
      d.text = build(n);
      d.tokens = docs.tokens(d.text);
      if (std::abs(d.tokens - t.length) < best_off) best_off = std::abs(d.tokens - t.length), best = d;
      if (best_off <= tol) break;
      const double per_entry = std::max(0.5, double(d.tokens - intro) / double(n));
      const long next = std::max<long>(kCommon * (kRareMin + 2), std::lround(n + (t.length - d.tokens) / per_entry));
      if (next == n) break;
      n = next;
    }
    best.target = t.length;
    best.needle_depth = std::numeric_limits<double>::quiet_NaN();
    Trial tr;
    tr.doc = best;
    tr.question = "Which 5 words appear most often in the list above? Answer with the 5 words only, separated by commas.";
    tr.references = common;
    return tr;
  }
};

}  // namespace

std::unique_ptr<Task> make_cwe_task() { return std::make_unique<CweTask>(); }

}  // namespace infinipot::nih
