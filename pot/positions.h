// Where a distillation puts the RoPE positions of the entries it keeps (PotOptions::positions).
//   reset  (CR-RoPE, the paper's Sec. 3.5): the kept entries take 0 .. keep-1 and the next
//          token takes keep. Positions never leave the pot's size, but the gaps between kept
//          entries vanish: text read thousands of tokens apart becomes adjacent.
//   stream: the kept entries keep the positions they were read at (the paper's "w/o CR-RoPE"
//          ablation). Distances stay true; positions grow with the input and leave the range
//          the model was trained on past its context length.
//   fit:   stream positions while they stay inside the model's trained context; when the
//          next cycle would pass it, every kept position p becomes floor(s * p) (runs of
//          consecutive entries stay consecutive), with s the largest scale that leaves room
//          for the next cycle. Older entries are squeezed the most, recent text stays near
//          true distances; falls back to reset when the kept entries cannot keep any gap.
//   auto:  the model's own rule (default_position_rule), resolved when the pot is made: the
//          default.
//   gaps:  each stretch of dropped text shrinks to at most `gap` positions (PotOptions::
//          position_gap); text read side by side stays side by side, and short distances stay
//          true. Positions then grow by the kept text plus a bounded gap per cut, not by the
//          input; fit's squeeze still applies if they would pass the trained context.
// Why fit exists (docs/models.md): Gemma 3 270M retrieves 12 of 12 keys at 4K with stream
// positions and 4 of 12 with reset, and a single reset of a 4K-token pot already breaks it.
// Why gaps exists: with stream positions it still loses keys read more than ~3K positions
// before the question, across the kilotoken-wide holes the distillations leave.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace infinipot {

enum class PositionRule { Reset, Stream, Fit, Gaps, Auto };
constexpr int kDefaultPositionGap = 256;  // gaps' widest cut (PotOptions::position_gap)

const char* position_rule_name(PositionRule rule);  // "reset", "stream", "fit", "gaps", "auto"
std::optional<PositionRule> parse_position_rule(const std::string& name);

// What `auto` means for a model: `gaps` for Gemma 3, whose global layers read true distances
// (docs/models.md: on its pass-key table from 4K to 32K tokens gaps finds the most keys and
// reset the fewest); `reset` (CR-RoPE, the paper's) for every other model, as measured on
// SmolLM2 (docs/results.md).
PositionRule default_position_rule(const std::string& architecture);

// What one distillation does to positions, decided once for every layer and head.
struct PositionStep {
  PositionRule applied = PositionRule::Reset;  // Reset, Stream, or Fit with `scale`
  double scale = 1.0;   // Fit: new position = floor(scale * old), kept strictly increasing
  int next = 0;         // the position the next token takes (Fit: at least this)
};

// rule: the pot's rule; next_position: the position the next token would take without a
// change; room: positions the pot uses before its next distillation (new entries, catalyst);
// window: the model's trained context (0: unknown, fit then keeps stream positions);
// keep: entries kept.
PositionStep plan_positions(PositionRule rule, int next_position, int room, int window, int keep);

// Fit's new positions of one layer's and head's kept entries, given in ascending order of
// their old positions: floor(scale * p), each at least one above the one before.
std::vector<int> squeeze_positions(const std::vector<int>& old_ascending, double scale);

// Gaps' new positions of one layer's and head's kept entries (ascending old positions): each
// keeps its distance to the entry before it (the first: to position -1), at most `gap`.
// *next: where the next token goes, the same way from old_next (where it would have gone).
std::vector<int> cap_gaps(const std::vector<int>& old_ascending, int old_next, int gap, int* next);

}  // namespace infinipot
