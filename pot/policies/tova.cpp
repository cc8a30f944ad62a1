// tova: TOVA (Oren et al., 2024): at each eviction keep the entries the newest token attends
// to most, averaged over the layer's heads, chosen per layer. The paper's "w/o CaP, NuC" row.
// In the pot the last token read is re-run once per distillation to measure its attention.
#include "pot/policy_registry.h"
#include "pot/selection.h"

namespace infinipot {
namespace {

class TovaPolicy : public PotPolicy {
 public:
  explicit TovaPolicy(const PolicyParams& p) : per_head_(p.per_head) {}
  PolicyNeeds needs() const override {
    PolicyNeeds n;
    n.last_query = true;
    return n;
  }
  ChoicePlan plan(const PotScores& s) const override {
    ChoiceShape shape;
    shape.per_layer = true;
    shape.per_head = per_head_;
    return {{{Measure::LastQuery, s.keep}}, shape};
  }

 private:
  bool per_head_;
};

}  // namespace

std::unique_ptr<PotPolicy> make_tova_policy(const PolicyParams& p) { return std::make_unique<TovaPolicy>(p); }

}  // namespace infinipot
