// The CCD scorer shared by infinipot, cap (catalyst only) and nuc (novelty only).
#pragma once
#include <cmath>

#include "pot/policy_registry.h"
#include "pot/selection.h"

namespace infinipot {

class CcdPolicy : public PotPolicy {
 public:
  // Defaults of the span rule (docs/pot.md: how they were chosen).
  static constexpr int kDefaultPool = 4;
  static constexpr int kDefaultPoolAhead = 1;
  // The recent window: 32 entries, but never more than an eighth of the free places, so a
  // small pot still chooses most of what it keeps by its scores.
  static constexpr int kDefaultRecent = 32;
  CcdPolicy(const PolicyParams& p, float nuc_ratio);
  PolicyNeeds needs() const override;
  ChoicePlan plan(const PotScores& s) const override;

 private:
  PolicyParams p_;
  float nuc_ratio_;
};

}  // namespace infinipot
