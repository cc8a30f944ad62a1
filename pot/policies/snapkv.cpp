// snapkv: SnapKV (Li et al., 2024), the memory-unconstrained reference. The whole prompt is in
// memory; once, before answering, the observation window (the question in its template, run
// as the catalyst) scores every entry; scores are max-pooled over 7 neighbours (pool 3 each
// way) and each KV head keeps its own top entries. The pot then holds --pot entries and the
// question is appended after them.
#include "pot/policy_registry.h"
#include "pot/selection.h"

namespace infinipot {
namespace {

class SnapkvPolicy : public PotPolicy {
 public:
  static constexpr int kPool = 3;  // SnapKV's kernel of 7
  explicit SnapkvPolicy(const PolicyParams& p) : pool_(p.pool >= 0 ? p.pool : kPool) {}
  PolicyNeeds needs() const override {
    PolicyNeeds n;
    n.catalyst = true;
    return n;
  }
  ChoicePlan plan(const PotScores& s) const override {
    ChoiceShape shape;
    shape.per_layer = true;
    shape.per_head = true;
    shape.back = shape.fwd = pool_;
    return {{{Measure::Catalyst, s.keep}}, shape};
  }

 private:
  int pool_;
};

}  // namespace

std::unique_ptr<PotPolicy> make_snapkv_policy(const PolicyParams& p) { return std::make_unique<SnapkvPolicy>(p); }

}  // namespace infinipot
