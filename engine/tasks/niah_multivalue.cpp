// niah_multivalue: four needles for one key with four different numbers, the first at the
// depth and the others spread around the document; all four must be in the answer.
#include "engine/tasks/task_registry.h"

namespace infinipot::nih {
namespace {

constexpr size_t kValues = 4;

class NiahMultivalueTask : public Task {
 public:
  const char* name() const override { return "niah_multivalue"; }
  const char* summary() const override {
    return "4 number needles for one key; share of the 4 numbers in the answer";
  }
  const char* headline() const override { return "all 4 numbers found"; }
  ValueKind kind() const override { return ValueKind::Number; }
  Rule rule() const override { return Rule::All; }
  // Four 7-digit numbers (a token per digit in SmolLM2's vocabulary), separators and the
  // lead-in the model tends to write ("The special magic numbers for tomato are: ...").
  int default_n_predict() const override { return 64; }
  Trial make(const TrialSpec& t, DocumentBuilder& docs) const override {
    TrialRng rng(name(), t);
    const std::string key = rng.words(1)[0];
    const std::vector<std::string> values = rng.numbers(kValues, 7);
    const std::vector<double> depths = spread_depths(t.depth, kValues);
    std::vector<Insert> inserts;
    for (size_t i = 0; i < kValues; ++i) inserts.push_back({depths[i], magic_needle(key, values[i], kind())});
    Trial tr;
    tr.doc = docs.build(t.length, inserts);
    tr.question = "What are all the special magic numbers for " + key +
                  "? There are 4. Answer with the 4 numbers only, separated by commas.";
    tr.references = values;
    tr.watch = values[0];
    return tr;
  }
};

}  // namespace

std::unique_ptr<Task> make_niah_multivalue_task() { return std::make_unique<NiahMultivalueTask>(); }

}  // namespace infinipot::nih
