// Which KV entries survive a distillation: the token selection of InfiniPot's Continual
// Context Distillation (paper Sec. 3.3.3 and Appendix B), as plain host code.
//
// Per KV head, over the filled slots [0, size):
//   * slots [0, pinned) always survive (the chat template's prefix: system prompt and the
//     user header; the model leans on them as attention sinks and they carry the roles);
//   * of the rest, the nuc_slots entries with the highest novelty (NuC: -log p of the token
//     given the pot before it) survive first;
//   * the remaining keep - pinned - nuc_slots places go to the highest catalyst attention mass
//     (CaP: attention the catalyst prompt paid the entry, summed over the head's query group).
// Survivors keep their order, so the result per head is ascending. Ties go to the later slot
// (more recent text), which makes the choice deterministic.
#pragma once
#include <string>
#include <vector>

namespace infinipot {

enum class PotPolicy {
  InfiniPot,  // CaP + NuC, as above
  Recent,     // pinned prefix + the most recent entries (StreamingLLM-style baseline)
};
PotPolicy parse_pot_policy(const std::string& name);  // "infinipot" | "recent"
const char* pot_policy_name(PotPolicy p);

struct SelectionRequest {
  int n_heads = 0;    // KV heads
  int size = 0;       // filled slots
  int pinned = 0;     // slots [0, pinned) always kept
  int keep = 0;       // survivors per head, pinned included; pinned <= keep <= size
  int nuc_slots = 0;  // of keep - pinned, how many are chosen by NuC first
  int stride = 0;     // row stride of mass and nuc (the pot's capacity)
  const float* mass = nullptr;  // [n_heads][stride] CaP attention mass
  const float* nuc = nullptr;   // [n_heads][stride] NuC score of the token in each slot
  PotPolicy policy = PotPolicy::InfiniPot;
  // Each candidate's scores are first max-pooled over the slots within `pool` of it (same
  // head, candidates only), as SnapKV pools attention: a token keeps its neighbours, so a
  // phrase (a name, a number) survives whole instead of as scattered pieces. 0: no pooling.
  int pool = 0;
  // All KV heads of the layer keep the same entries, chosen by the scores summed over heads
  // (slots must then hold the same tokens in every head, which holds if every distillation
  // of the stream used it). false: per head, as the paper does.
  bool shared_heads = false;
};

// [n_heads][keep] surviving slots, ascending per head. Throws std::invalid_argument on an
// inconsistent request. NaN scores rank below every number.
std::vector<int> select_survivors(const SelectionRequest& r);

}  // namespace infinipot
