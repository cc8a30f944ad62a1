#include "pot/positions.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace infinipot {

const char* position_rule_name(PositionRule rule) {
  switch (rule) {
    case PositionRule::Reset: return "reset";
    case PositionRule::Stream: return "stream";
    case PositionRule::Fit: return "fit";
    case PositionRule::Gaps: return "gaps";
    case PositionRule::Auto: return "auto";
  }
  return "?";
}

std::optional<PositionRule> parse_position_rule(const std::string& name) {
  for (PositionRule r : {PositionRule::Reset, PositionRule::Stream, PositionRule::Fit, PositionRule::Gaps, PositionRule::Auto})
    if (name == position_rule_name(r)) return r;
  return std::nullopt;
}

PositionRule default_position_rule(const std::string& architecture) {
  return architecture == "gemma3" ? PositionRule::Gaps : PositionRule::Reset;
}

PositionStep plan_positions(PositionRule rule, int next_position, int room, int window, int keep) {
  if (rule == PositionRule::Auto) throw std::logic_error("plan_positions: resolve the auto rule first");
  PositionStep step;
  step.applied = rule;
  if (rule == PositionRule::Reset) {
    step.next = keep;
    return step;
  }
  step.next = next_position;
  if (rule == PositionRule::Stream || window <= 0 || next_position + room <= window) {
    step.applied = PositionRule::Stream;
    return step;
  }
  // The next cycle must end inside the window: the kept entries get [0, target).
  const int target = window - room;
  if (target <= keep) {  // no room for any gap: pack them, as reset does
    step.applied = PositionRule::Reset;
    step.next = keep;
    return step;
  }
  step.scale = static_cast<double>(target) / next_position;
  step.next = target;
  return step;
}

std::vector<int> squeeze_positions(const std::vector<int>& old_ascending, double scale) {
  std::vector<int> out(old_ascending.size());
  int last = -1;
  for (size_t j = 0; j < old_ascending.size(); ++j) {
    last = std::max(last + 1, static_cast<int>(std::floor(scale * old_ascending[j])));
    out[j] = last;
  }
  return out;
}

std::vector<int> cap_gaps(const std::vector<int>& old_ascending, int old_next, int gap, int* next) {
  std::vector<int> out(old_ascending.size());
  int at = -1, prev = -1;  // the last new and old positions (-1: before the first)
  for (size_t j = 0; j < old_ascending.size(); ++j) {
    at += std::min(old_ascending[j] - prev, gap);
    prev = old_ascending[j];
    out[j] = at;
  }
  *next = at + std::min(old_next - prev, gap);
  return out;
}

}  // namespace infinipot
