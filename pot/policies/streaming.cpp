// streaming: StreamingLLM (Xiao et al., 2024): the first 4 tokens (attention sinks) and the
// most recent entries. The sinks are the first 4 tokens of the chat prefix; the rest of the
// prefix ages out like any other text.
#include "pot/policy_registry.h"
#include <algorithm>

#include "pot/selection.h"

namespace infinipot {
namespace {

class StreamingPolicy : public PotPolicy {
 public:
  static constexpr int kSinks = 4;
  PolicyNeeds needs() const override { return {}; }
  int pinned(int prefix) const override { return std::min(prefix, kSinks); }
  ChoicePlan plan(const PotScores& s) const override {
    ChoiceShape shape;
    shape.recent = s.keep - s.pinned;
    return {{}, shape};
  }
};

}  // namespace

std::unique_ptr<PotPolicy> make_streaming_policy(const PolicyParams&) { return std::make_unique<StreamingPolicy>(); }

}  // namespace infinipot
