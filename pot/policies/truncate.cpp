// truncate: LongBench's truncation of an over-long input: keep its first half and its last
// half. In the pot: the chat prefix, the first half of the free places from the start of the
// document (they stay at the front after every compaction, so they are the document's first
// tokens), and the most recent text in the rest.
#include "pot/policy_registry.h"
#include "pot/selection.h"

namespace infinipot {
namespace {

class TruncatePolicy : public PotPolicy {
 public:
  PolicyNeeds needs() const override { return {}; }
  ChoicePlan plan(const PotScores& s) const override {
    ChoiceShape shape;
    shape.head = (s.keep - s.pinned) / 2;
    shape.recent = s.keep - s.pinned - shape.head;
    return {{}, shape};
  }
};

}  // namespace

std::unique_ptr<PotPolicy> make_truncate_policy(const PolicyParams&) { return std::make_unique<TruncatePolicy>(); }

}  // namespace infinipot
