#include "engine/pot_plan.h"

#include "model_loader/setting_names.h"

#include <stdexcept>

#include "engine/engine.h"

namespace infinipot {

const char* const kGeneralCatalyst = "Summarize the text above. List its key facts, names, numbers, dates and events.";

PotPlan::PotPlan(const Engine& engine, const PromptParts& parts, const std::string& question, const PotChoice& choice)
    : policy_(&find_policy(choice.pot.policy)), choice_(choice) {
  // CaP-Q when the question is known, CaP-G otherwise (paper, Table 2); the choice's text overrides.
  const std::string text = !choice.catalyst.empty() ? choice.catalyst : !question.empty() ? question : kGeneralCatalyst;
  if (policy_->make && policy_->make(choice.pot.params)->needs().catalyst)
    catalyst_ = engine.catalyst_prompt(parts, text, &question_rows_);
}

PotPlan PotPlan::draft(const Engine& engine, const PromptParts& parts, const std::string& question,
                       const PotChoice& choice, int n_predict) {
  PotPlan p(engine, parts, question, choice);
  p.layout_ = Engine::pot_layout(parts, p.catalyst_, n_predict);
  return p;
}

PotPlan PotPlan::make(const Engine& engine, const PromptParts& parts, const std::string& question,
                      const PotChoice& choice, int n_predict) {
  PotPlan p = draft(engine, parts, question, choice, n_predict);
  p.size();
  return p;
}

PotPlan PotPlan::stream(const Engine& engine, const PromptParts& prefix, const PotChoice& choice, int reserve) {
  PotPlan p(engine, prefix, "", choice);
  if (!p.reading().reads_a_stream())
    throw SettingError("policy", choice.pot.policy, "a policy that reads through a pot",
                       "{policy} \"" + choice.pot.policy + "\" (" + p.policy_->summary +
                           ") must see the whole input before it selects; it cannot read a stream");
  p.layout_.pinned = static_cast<int>(prefix.prefix.size());
  p.layout_.catalyst = static_cast<int>(p.catalyst_.size());
  p.layout_.body = 1;  // unknown: at least one token
  p.layout_.final_tokens = reserve;
  p.size();
  return p;
}

PotPlan PotPlan::restored(const Engine& engine, const PromptParts& parts, const std::string& question,
                          const PotChoice& choice) {
  PotPlan p(engine, parts, question, choice);
  p.store_ = {choice.pot.capacity, choice.pot};
  p.sized_ = true;
  return p;
}

PotPlan PotPlan::with_capacity(int capacity) const {
  PotPlan p = *this;
  p.choice_.pot.capacity = capacity;
  p.choice_.pot.keep = 0;
  p.size();
  return p;
}

void PotPlan::size() {
  store_ = reading().size({choice_.pot, choice_.ctx, choice_.at_least}, layout_);
  sized_ = true;
}

}  // namespace infinipot
