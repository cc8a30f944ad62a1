// One job's plan for the KV store: made once per job (a run, a nih trial, a bench row, a C API
// session, a served conversation) from what the job asks (PotChoice) and its prompt. It holds
// the catalyst prompt (CaP), the token layout the pot must fit, and the store sized and
// validated by the policy's way of reading (pot/reading.h); Engine::prepare(plan) then
// allocates it and Engine::generate(parts, plan, ...) reads and answers through it.
#pragma once
#include <string>
#include <vector>

#include "pot/memory_pot.h"
#include "pot/policy_registry.h"
#include "pot/reading.h"

namespace infinipot {

class Engine;
struct PromptParts;

// The general catalyst prompt (CaP-G) when no question is known in advance.
extern const char* const kGeneralCatalyst;

// What a job asks of the KV store.
struct PotChoice {
  PotOptions pot;         // pot.policy names the policy (pot/policy_registry.h), pot.capacity its pot's size
  std::string catalyst;   // the text the catalyst prompt asks; "": the question, else kGeneralCatalyst
  int ctx = 0;            // a full cache's entries (0: the prompt and its answer)
  int at_least = 0;       // StoreRequest::at_least
};

class PotPlan {
 public:
  // The catalyst and layout of this prompt (question: its question, "" for none) with an
  // answer of n_predict tokens, and the store sized for them. Throws std::invalid_argument
  // naming what to change when the settings cannot hold the prompt.
  static PotPlan make(const Engine& engine, const PromptParts& parts, const std::string& question,
                      const PotChoice& choice, int n_predict);
  // The same without sizing the store (sized() is false): for a search over pot sizes.
  static PotPlan draft(const Engine& engine, const PromptParts& parts, const std::string& question,
                       const PotChoice& choice, int n_predict);
  // A pot that reads a stream whose length is not known yet (the C API's feed): the chat
  // prefix of parts pinned, `reserve` entries kept for each question and its answer. Throws
  // std::invalid_argument for a policy that must see the whole input first.
  static PotPlan stream(const Engine& engine, const PromptParts& prefix, const PotChoice& choice, int reserve);
  // A pot restored from a snapshot: choice.pot holds the snapshot's options (already
  // resolved); the catalyst is this question's. The store is the snapshot's.
  static PotPlan restored(const Engine& engine, const PromptParts& parts, const std::string& question,
                          const PotChoice& choice);

  // This plan with a pot of `capacity` entries, keep at the policy's default (throws as make).
  PotPlan with_capacity(int capacity) const;

  const PolicyInfo& policy() const { return *policy_; }
  const Reading& reading() const { return *policy_->reading; }
  const std::vector<TokenId>& catalyst() const { return catalyst_; }
  int question_rows() const { return question_rows_; }  // catalyst rows that are the question
  const PotLayout& layout() const { return layout_; }
  bool sized() const { return sized_; }
  int kv_capacity() const { return store_.kv_capacity; }
  // The resolved pot; null when the store is a plain KV cache.
  const PotOptions* pot() const { return store_.pot ? &*store_.pot : nullptr; }

 private:
  PotPlan(const Engine& engine, const PromptParts& parts, const std::string& question, const PotChoice& choice);
  void size();
  const PolicyInfo* policy_ = nullptr;
  PotChoice choice_;
  std::vector<TokenId> catalyst_;
  int question_rows_ = 0;
  PotLayout layout_;
  StorePlan store_;
  bool sized_ = false;
};

}  // namespace infinipot
