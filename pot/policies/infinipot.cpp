// infinipot: the paper's Continual Context Distillation (Sec. 3.3, Appendix B) made to keep
// facts whole. The free places go first to novelty (NuC, the nuc_ratio share), then to the
// catalyst prompt's attention (CaP). What we add, and why (docs/pot.md has the evidence):
//   * spans, not tokens: an entry takes the best score within `pool` entries before it and
//     `pool_ahead` after it, widened to its whole word or digit run. SmolLM2 writes a number
//     one digit per token; the question attends to "pass key is", and the digits after it
//     must come along, all of them, and the "." after them, or a model copying the number
//     cannot tell where it ends (pot/word_runs.h);
//   * one choice for every layer and KV head: a digit kept in some layers but not in the
//     layers that copy it is lost, so the scores are summed over layers and heads;
//   * a recent window: the newest entries stay, so reading on has its local context.
#include "pot/policies/ccd.h"

namespace infinipot {

CcdPolicy::CcdPolicy(const PolicyParams& p, float nuc_ratio) : p_(p), nuc_ratio_(nuc_ratio) {
  if (p_.pool < 0) p_.pool = kDefaultPool;
  if (p_.pool_ahead < 0) p_.pool_ahead = kDefaultPoolAhead;
}

PolicyNeeds CcdPolicy::needs() const {
  PolicyNeeds n;
  n.catalyst = nuc_ratio_ < 1.0f;
  n.novelty = nuc_ratio_ > 0.0f;
  return n;
}

ChoicePlan CcdPolicy::plan(const PotScores& s) const {
  ChoiceShape shape;
  shape.per_head = p_.per_head;
  shape.per_layer = p_.per_layer;
  const int free_all = std::max(0, s.keep - s.pinned);
  shape.recent = p_.recent >= 0 ? p_.recent : std::min(kDefaultRecent, free_all / 8);
  shape.back = p_.pool;
  shape.fwd = p_.pool_ahead;
  shape.units = p_.units != UnitRule::Token;
  // NuC's share is of the places left after the prefix and the recent window (paper: alpha).
  const int free_places = free_all - std::min(shape.recent, free_all);
  const int nuc_places = static_cast<int>(std::lround(nuc_ratio_ * free_places));
  ChoicePlan plan{{}, shape};
  if (nuc_places > 0) plan.stages.push_back({Measure::Novelty, nuc_places});
  if (nuc_ratio_ < 1.0f) plan.stages.push_back({Measure::Catalyst, free_places - nuc_places});
  return plan;
}

std::unique_ptr<PotPolicy> make_infinipot_policy(const PolicyParams& p) {
  return std::make_unique<CcdPolicy>(p, p.nuc_ratio);
}

}  // namespace infinipot
