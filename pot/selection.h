// The selection steps every policy is built from, as plain host code. The device kernels in
// cl_kernels/pot_select.cl do the same steps and are tested against these.
//
// A choice runs per group of (layer, KV head) rows that keep the same entries: one head, a
// layer's heads together, or every layer together (PotScores, ChoiceShape). For a group:
//   1. each stage's score rows are summed over the group (NaN counts as nothing; NaN where
//      every member is NaN);
//   2. spread: every slot takes the best score within `back` slots before it and `fwd` after
//      it, widened to the whole word or digit run it belongs to, so a fact chosen by one of its
//      tokens survives whole (spread_scores);
//   3. the pinned prefix, the first `head` entries after it and the `recent` newest entries
//      are kept outright;
//   4. stage by stage, the best remaining slots are taken (take_best: higher first, NaN last,
//      ties to the later slot) until `keep` are kept.
// Survivors are returned ascending, the same list for every member of the group.
#pragma once
#include <vector>

#include "pot/policy.h"

namespace infinipot {

struct ChoiceStage {
  const float* score = nullptr;  // [n_layers][n_heads][stride]
  int count = 0;                 // places this stage fills; the last stage fills what is left
};

// out[j] = max of in[i] for i in [first(j) - back, last(j) + fwd] within [lo, hi), where
// [first(j), last(j)] are the slots of j's unit (units null: just j). NaN only where every
// value in the window is NaN.
void spread_scores(const float* in, const int* unit, int lo, int hi, int back, int fwd, float* out);

// Marks the `count` best of the slots [lo, hi) not yet taken (higher score first, NaN last,
// ties to the later slot). Returns how many it marked (fewer if fewer were free).
int take_best(const float* score, int lo, int hi, int count, std::vector<char>& taken);

// The scores a plan stage reads (null when the policy did not measure them).
const float* measure_scores(const PotScores& s, Measure m);

// Runs the choice described above. Returns [n_layers][n_heads][keep] slots.
std::vector<int> choose_survivors(const PotScores& s, const std::vector<ChoiceStage>& stages, const ChoiceShape& shape);

// --keep auto: how many entries a distillation keeps, as its scores justify. Each stage's
// scores are summed over every layer and head (negative and NaN count as nothing), spread as
// the choice spreads them (plan.shape: a kept fact takes its window), and made a share of
// their own total over the free slots [pinned, size); the shares are mixed by the stages'
// counts in the plan. Returns pinned + the fewest free slots holding `mass` of that mix,
// clamped to [least, most] (a plan without stages, or scores without mass: most).
int keep_by_mass(const PotScores& s, const ChoicePlan& plan, float mass, int least, int most);

}  // namespace infinipot
