// A new policy is one file plus one registry row. This test is that file: it defines a policy
// the registry does not ship ("tova_window": the last token's attention, per layer, with a
// window of the newest entries and each kept entry's neighbours), adds its row with
// register_policy, and runs it through the paths every registered policy takes: the spec
// parser and its settings table, the job's plan, the answer through a pot on the device, the
// host choice as the reference, and a streaming plan. Nothing outside this file names it.
#include "tests/pot/pot_fixture.h"

#include "engine/answer.h"
#include "pot/policy_spec.h"
#include "pot/selection.h"

namespace infinipot {
namespace {

class TovaWindowPolicy : public PotPolicy {
 public:
  explicit TovaWindowPolicy(const PolicyParams& p) : recent_(p.recent >= 0 ? p.recent : 4) {}
  PolicyNeeds needs() const override {
    PolicyNeeds n;
    n.last_query = true;
    return n;
  }
  ChoicePlan plan(const PotScores& s) const override {
    ChoiceShape shape;
    shape.per_layer = true;
    shape.recent = std::min(recent_, std::max(0, s.keep - s.pinned));
    shape.back = shape.fwd = 1;
    return {{{Measure::LastQuery, s.keep}}, shape};
  }

 private:
  int recent_;
};

std::unique_ptr<PotPolicy> make_tova_window(const PolicyParams& p) { return std::make_unique<TovaWindowPolicy>(p); }

// The row: it reads through a pot, takes the pot's own settings and `recent`, needs a size.
const PolicyInfo& registered() {
  static const PolicyInfo& row = []() -> const PolicyInfo& {
    register_policy({"tova_window", &reading_through_pot(),
                     bit(Setting::Pot) | bit(Setting::Keep) | bit(Setting::Positions) | bit(Setting::Inspect) |
                         bit(Setting::Recent),
                     bit(Setting::Pot), "test only: last-token attention, per layer, a recent window, neighbours kept",
                     make_tova_window});
    return find_policy("tova_window");
  }();
  return row;
}

TEST(PolicyAdded, ItsRowIsFoundAndNamedWithTheOthers) {
  const PolicyInfo& row = registered();
  EXPECT_EQ(std::string(row.name), "tova_window");
  EXPECT_NE(policy_names().find("tova_window"), std::string::npos);
  EXPECT_THROW(register_policy(row), std::invalid_argument) << "a name is registered once";
}

TEST(PolicyAdded, TheSpecParserReadsItsSettingsAndRefusesTheOthers) {
  registered();
  const PolicySpec spec = parse_policy_spec("tova_window:pot=96:recent=2");
  EXPECT_EQ(spec.config(), "tova_window:pot=96:recent=2");
  EXPECT_TRUE(spec.holds_pot());
  EXPECT_EQ(spec.options().params.recent, 2);
  for (const char* other : {"tova_window:pot=96:nuc_ratio=0.2", "tova_window:pot=96:ahead=1", "tova_window:ctx=64"}) {
    SCOPED_TRACE(other);
    try {
      parse_policy_spec(other);
      ADD_FAILURE() << "accepted";
    } catch (const SettingNotRead& e) {
      EXPECT_EQ(&e.policy, &registered());
      EXPECT_NE(std::string(e.what()).find("does not apply"), std::string::npos);
    }
  }
  EXPECT_THROW(parse_policy_spec("tova_window"), std::invalid_argument) << "it needs a pot size";
}

// Through a 112-entry pot over a document many times its size: it distills, the device's
// choice holds what the host's (the plan run by PotPolicy::select) holds, and each layer
// keeps its newest entries (the recent window).
TEST(PolicyAdded, ItAnswersThroughAPotAndTheDeviceChoiceMatchesTheHost) {
  registered();
  struct Held {
    Answer answer;
    std::vector<std::vector<int>> sources;
    int size = 0;
  };
  auto run = [](bool device) {
    auto e = make_engine(tiny_model());
    AnswerOptions o;
    o.n_predict = 4;
    o.pot.policy = "tova_window";
    o.pot.capacity = 112;
    o.pot.device_select = device;
    Held h;
    h.answer = answer(*e, document(60), kQuestion, o);
    for (int l = 0; l < e->kv().n_layers(); ++l)
      for (int k = 0; k < e->config().n_head_kv; ++k) h.sources.push_back(e->pot()->sources(l, k));
    h.size = e->kv().size();
    return h;
  };
  const Held host = run(false), device = run(true);
  ASSERT_GE(host.answer.pot["cycles"].get<int>(), 3) << "the document must overflow the pot";
  EXPECT_EQ(host.answer.pot["policy"], "tova_window");
  EXPECT_EQ(host.answer.kv_capacity, 112);
  EXPECT_LE(host.size, 112);
  EXPECT_EQ(device.answer.pot["cycles"], host.answer.pot["cycles"]);
  EXPECT_EQ(device.sources, host.sources);
  EXPECT_EQ(device.answer.result.tokens, host.answer.result.tokens);
  EXPECT_EQ(device.answer.pot["digest"], host.answer.pot["digest"]);
  // The entries of one layer agree across its KV heads (a per-layer choice).
  for (size_t r = 0; r + 1 < host.sources.size(); r += 2) EXPECT_EQ(host.sources[r], host.sources[r + 1]);
}

TEST(PolicyAdded, ItsPlanSizesAPotAndReadsAStream) {
  registered();
  auto e = make_engine(tiny_model());
  PotChoice c;
  c.pot.policy = "tova_window";
  c.pot.capacity = 128;
  const PromptParts parts = e->prompt_parts("", document(20), kQuestion);
  const PotPlan plan = PotPlan::make(*e, parts, kQuestion, c, 8);
  ASSERT_NE(plan.pot(), nullptr);
  EXPECT_EQ(plan.kv_capacity(), 128);
  EXPECT_TRUE(plan.catalyst().empty()) << "it measures no catalyst";
  EXPECT_EQ(plan.pot()->keep, 64) << "the pot's default keep: half";
  const PotPlan streamed = PotPlan::stream(*e, e->prompt_parts("", "", ""), c, 16);
  EXPECT_EQ(streamed.kv_capacity(), 128);
  c.pot.capacity = 3;
  EXPECT_THROW(PotPlan::make(*e, parts, kQuestion, c, 8), std::invalid_argument) << "a pot too small for the prompt";
}

}  // namespace
}  // namespace infinipot
