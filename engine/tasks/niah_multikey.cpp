// niah_multikey: the real needle at a depth and three distractor needles of the same form
// for other keys (other words, other numbers) spread around the document; asked for the
// real key's number. Scored by the answer's first number, so listing every number found
// gets no credit.
#include "engine/tasks/task_registry.h"

namespace infinipot::nih {
namespace {

constexpr size_t kDistractors = 3;

class NiahMultikeyTask : public Task {
 public:
  const char* name() const override { return "niah_multikey"; }
  const char* summary() const override {
    return "the key's number needle among 3 distractor needles for other keys; the answer's first number";
  }
  const char* headline() const override { return "the key's number found"; }
  ValueKind kind() const override { return ValueKind::Number; }
  Rule rule() const override { return Rule::First; }
  int default_n_predict() const override { return 24; }  // room for a lead-in, as niah_single
  Trial make(const TrialSpec& t, DocumentBuilder& docs) const override {
    TrialRng rng(name(), t);
    const std::vector<std::string> keys = rng.words(1 + kDistractors);  // distinct: keys[0] is the real one
    const std::vector<std::string> values = rng.numbers(keys.size(), 7);
    const std::vector<double> depths = spread_depths(t.depth, keys.size());
    std::vector<Insert> inserts;
    for (size_t i = 0; i < keys.size(); ++i) inserts.push_back({depths[i], magic_needle(keys[i], values[i], kind())});
    Trial tr;
    tr.doc = docs.build(t.length, inserts);
    tr.question = "What is the special magic number for " + keys[0] + "? Answer with the number only.";
    tr.references = {values[0]};
    tr.watch = values[0];
    return tr;
  }
};

}  // namespace

std::unique_ptr<Task> make_niah_multikey_task() { return std::make_unique<NiahMultikeyTask>(); }

}  // namespace infinipot::nih
