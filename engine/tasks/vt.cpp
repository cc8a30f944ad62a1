// vt (variable tracking): a chain "VAR AAAAA = 12345." "VAR BBBBB = AAAAA." ... (five
// variables) hidden in the haystack, its first statement at the depth and the rest spread
// in order from there to the end, plus a distractor chain with another value starting half
// a document away. Asked which variables hold the value; the share of the chain's names in
// the answer is the score.
#include <set>

#include "engine/tasks/task_registry.h"

namespace infinipot::nih {
namespace {

constexpr size_t kChain = 5;  // variables per chain (four hops)

class VtTask : public Task {
 public:
  const char* name() const override { return "vt"; }
  const char* summary() const override {
    return "variable tracking: a 5-variable assignment chain + a distractor chain; share of the chain's names";
  }
  const char* headline() const override { return "all 5 variables found"; }
  ValueKind kind() const override { return ValueKind::Word; }
  Rule rule() const override { return Rule::All; }
  // Five names of five capitals (2-4 tokens each), separators and a lead-in.
  int default_n_predict() const override { return 48; }
  Trial make(const TrialSpec& t, DocumentBuilder& docs) const override {
    TrialRng rng(name(), t);
    std::set<std::string> taken;
    auto chain = [&] {
      std::vector<std::string> names;
      while (names.size() < kChain) {
        std::string n;
        for (int i = 0; i < 5; ++i) n += char('A' + rng.below(26));
        if (taken.insert(n).second) names.push_back(n);
      }
      return names;
    };
    const std::vector<std::string> names = chain(), other = chain();
    const std::vector<std::string> values = rng.numbers(2, 5);
    // Statements in order, from `start` to the end of the document.
    auto statements = [&](const std::vector<std::string>& ns, const std::string& value, double start,
                          std::vector<Insert>& out) {
      for (size_t i = 0; i < ns.size(); ++i)
        out.push_back({start + (1.0 - start) * double(i) / double(ns.size()),
                       "VAR " + ns[i] + " = " + (i == 0 ? value : ns[i - 1]) + "."});
    };
    std::vector<Insert> inserts;
    statements(names, values[0], t.depth, inserts);
    statements(other, values[1], spread_depths(t.depth, 2)[1], inserts);
    Trial tr;
    tr.doc = docs.build(t.length, inserts);
    tr.question = "Which variables are assigned the value " + values[0] +
                  ", directly or through other variables? Answer with the variable names only, separated by commas.";
    tr.references = names;
    tr.watch = "VAR " + names[0] + " = " + values[0] + ".";
    return tr;
  }
};

}  // namespace

std::unique_ptr<Task> make_vt_task() { return std::make_unique<VtTask>(); }

}  // namespace infinipot::nih
