// h2o: Heavy-Hitter Oracle (Zhang et al., 2023): per layer and KV head, the entries with the
// most attention accumulated from every query since they were read, plus a window of the most
// recent entries (half of the free places by default, as the paper splits its budget).
#include "pot/policy_registry.h"
#include "pot/selection.h"

namespace infinipot {
namespace {

class H2oPolicy : public PotPolicy {
 public:
  explicit H2oPolicy(const PolicyParams& p) : recent_(p.recent) {}
  PolicyNeeds needs() const override {
    PolicyNeeds n;
    n.accumulated = true;
    return n;
  }
  ChoicePlan plan(const PotScores& s) const override {
    ChoiceShape shape;
    shape.per_layer = true;
    shape.per_head = true;
    shape.recent = recent_ >= 0 ? recent_ : (s.keep - s.pinned) / 2;
    return {{{Measure::Accumulated, s.keep}}, shape};
  }

 private:
  int recent_;
};

}  // namespace

std::unique_ptr<PotPolicy> make_h2o_policy(const PolicyParams& p) { return std::make_unique<H2oPolicy>(p); }

}  // namespace infinipot
