// niah_multiquery: four keys, one number each, the first needle at the depth and the others
// spread around the document; the question asks for all four keys at once.
#include "engine/tasks/task_registry.h"

namespace infinipot::nih {
namespace {

constexpr size_t kQueries = 4;

class NiahMultiqueryTask : public Task {
 public:
  const char* name() const override { return "niah_multiquery"; }
  const char* summary() const override {
    return "4 keys' number needles, all asked at once; share of the 4 numbers in the answer";
  }
  const char* headline() const override { return "all 4 numbers found"; }
  ValueKind kind() const override { return ValueKind::Number; }
  Rule rule() const override { return Rule::All; }
  int default_n_predict() const override { return 64; }  // as niah_multivalue
  Trial make(const TrialSpec& t, DocumentBuilder& docs) const override {
    TrialRng rng(name(), t);
    const std::vector<std::string> keys = rng.words(kQueries);
    const std::vector<std::string> values = rng.numbers(kQueries, 7);
    const std::vector<double> depths = spread_depths(t.depth, kQueries);
    std::vector<Insert> inserts;
    for (size_t i = 0; i < kQueries; ++i) inserts.push_back({depths[i], magic_needle(keys[i], values[i], kind())});
    Trial tr;
    tr.doc = docs.build(t.length, inserts);
    tr.question = "What are the special magic numbers for " + and_list(keys) +
                  "? Answer with the 4 numbers only, in that order, separated by commas.";
    tr.references = values;
    tr.watch = values[0];
    return tr;
  }
};

}  // namespace

std::unique_ptr<Task> make_niah_multiquery_task() { return std::make_unique<NiahMultiqueryTask>(); }

}  // namespace infinipot::nih
