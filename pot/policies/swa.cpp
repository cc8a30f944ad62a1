// swa: sliding-window attention: only the most recent entries, the chat prefix included in
// nothing (it ages out like any other text).
#include "pot/policy_registry.h"
#include "pot/selection.h"

namespace infinipot {
namespace {

class SwaPolicy : public PotPolicy {
 public:
  PolicyNeeds needs() const override { return {}; }
  int pinned(int) const override { return 0; }
  ChoicePlan plan(const PotScores& s) const override {
    ChoiceShape shape;
    shape.recent = s.keep;
    return {{}, shape};
  }
};

}  // namespace

std::unique_ptr<PotPolicy> make_swa_policy(const PolicyParams&) { return std::make_unique<SwaPolicy>(); }

}  // namespace infinipot
