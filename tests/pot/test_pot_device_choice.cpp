// The pot's choice on the device (the default) against its host reference inside the whole
// pipeline: for every pot policy, reading the same document through a pot that distills many
// times must leave exactly the same entries in every layer and KV head, and generate the same
// tokens, whichever side chose. The kernels themselves are checked step by step against the
// host in test_kernels_pot_select.cpp; this checks the pot hands them the right scores (CaP
// mass, NuC, H2O sums, TOVA's last-token attention, word runs) and reads the right rows back.
#include <gtest/gtest.h>

#include "tests/pot/pot_fixture.h"  // tiny_model()

namespace infinipot {
namespace {

// Sentences with numbers and names, so word and digit runs of several tokens occur.
std::string counted_document(int n) {
  static const char* names[] = {"Anna", "Boris", "Clara", "Dmitri", "Elena"};
  std::string s;
  for (int i = 0; i < n; ++i)
    s += std::string(names[i % 5]) + " counted " + std::to_string(1000 + i * 7919 % 90000) + " lanterns. ";
  return s;
}

struct Held {
  std::vector<TokenId> answer;
  std::vector<std::vector<int>> sources;  // [layer * n_kv_heads + head]
  int cycles = 0;
};

Held run(const std::string& policy, bool device, bool per_head) {
  EngineOptions eo;
  eo.model_path = tiny_model();
  eo.kv_type = "f32";
  Engine e(eo);
  const PromptParts parts = e.prompt_parts("", counted_document(50), "How many lanterns did Clara count?");
  PotOptions po;
  po.policy = policy;
  po.device_select = device;
  if (find_policy(policy).accepts(Setting::Recent)) po.params.recent = 4;  // leave most places to the scores
  if (per_head) po.params.per_head = po.params.per_layer = true;
  int question_rows = 0;
  std::vector<TokenId> catalyst;
  if (MemoryPot::needs_of(po).catalyst)
    catalyst = e.catalyst_prompt(parts, "How many lanterns did Clara count?", &question_rows);
  po.capacity = static_cast<int>(parts.prefix.size() + catalyst.size()) + 48;
  const bool whole = find_policy(policy).reading == &reading_whole_input();
  const PotLayout layout = Engine::pot_layout(parts, catalyst, 4);
  if (whole) {  // snapkv: the whole input in memory, 40 entries survive
    po.capacity = layout.pinned + layout.body + layout.catalyst + layout.final_tokens;
    po.keep = 40 + layout.pinned;
  }
  po = MemoryPot::resolve(po, layout);
  e.prepare_pot(po);
  GenerateOptions g;
  g.n_predict = 4;
  Held h;
  h.answer = e.generate(parts, catalyst, g, question_rows, *find_policy(policy).reading).tokens;
  h.cycles = e.pot()->stats().cycles;
  for (int l = 0; l < e.config().n_layer; ++l)
    for (int k = 0; k < e.config().n_head_kv; ++k) h.sources.push_back(e.pot()->sources(l, k));
  return h;
}

class DeviceChoiceInThePot : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceChoiceInThePot, HoldsWhatTheHostChoiceHolds) {
  const std::string policy = GetParam();
  for (bool per_head : {false, true}) {
    if (per_head && !find_policy(policy).accepts(Setting::Heads)) continue;
    SCOPED_TRACE(per_head ? "per head" : "policy's grouping");
    const Held host = run(policy, false, per_head);
    const Held device = run(policy, true, per_head);
    ASSERT_GE(host.cycles, policy == "snapkv" ? 1 : 5) << "the document must overflow the pot";
    EXPECT_EQ(device.cycles, host.cycles);
    ASSERT_EQ(device.sources.size(), host.sources.size());
    for (size_t i = 0; i < host.sources.size(); ++i) EXPECT_EQ(device.sources[i], host.sources[i]) << "row " << i;
    EXPECT_EQ(device.answer, host.answer);
  }
}

std::vector<std::string> pot_policies() {
  std::vector<std::string> out;
  for (const auto& info : policies())
    if (info.accepts(Setting::Pot)) out.push_back(info.name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, DeviceChoiceInThePot, ::testing::ValuesIn(pot_policies()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace infinipot
