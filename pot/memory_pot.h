// The memory pot: InfiniPot's Continual Context Distillation (CCD) over a fixed KV store.
//
// A stream is read into a pot of `capacity` KV entries. Its first `pinned` tokens (the chat
// template's prefix) stay for good. Whenever the next text would leave no room for the
// catalyst prompt, the pot distills:
//   1. CaP: the catalyst prompt is run after the pot's content; the attention it pays each
//      entry, per layer and KV head, is summed (Forward's EvalOptions::mass). Its own entries
//      are dropped again afterwards: it is never part of the context.
//   2. NuC: every token read got a novelty score when it was read, -log p(token | pot before
//      it), from the rows of the chunk that read it (Forward::token_nll).
//   3. Selection (pot/selection.h): per layer and KV head, the pinned prefix, then the most
//      novel tokens, then the highest catalyst mass, `keep` entries in all.
//   4. Compaction: survivors move to the front of their head, in order (KvStore::compact).
//   5. CR-RoPE: each survivor's key is re-rotated to position = its new slot, so the pot's
//      positions are always 0 .. size-1 and never leave the model's trained range.
// Reading then goes on into the freed slots. See docs/pot.md.
#pragma once
#include <vector>

#include "model_loader/tokenizer.h"
#include "runtime/kv_store.h"
#include "pot/selection.h"
#include "runtime/context.h"
#include "runtime/forward.h"

namespace infinipot {

struct PotOptions {
  int capacity = 0;        // |M|: KV entries the pot holds
  int keep = 0;            // |C|: entries left after a distillation, pinned prefix included (0: capacity / 2)
  float nuc_ratio = 0.5f;  // alpha: share of the non-pinned survivors chosen by NuC (paper: 0.5)
  PotPolicy policy = PotPolicy::InfiniPot;
  bool cr_rope = true;     // false: keys keep their stream positions (ablation; leaves the trained range)
  // Every KV head of a layer keeps the same entries (pot/selection.h). On by default: on
  // SmolLM2 (3 KV heads) per-head choice splits multi-token facts across heads (docs/pot.md).
  bool shared_heads = true;
  int pool = 0;            // max-pool scores over +-pool neighbouring slots before choosing (pot/selection.h)
};

// The token counts a pot has to fit, known before any device work.
struct PotLayout {
  int pinned = 0;     // chat prefix, never evicted
  int catalyst = 0;   // catalyst prompt tokens (0 for the recent policy)
  int body = 0;       // document tokens, read with distillation
  int final_tokens = 0;  // question + template tail + answer: appended with no distillation
};

struct PotStats {
  int cycles = 0;           // distillations run
  long long tokens_read = 0;  // prompt tokens (the answer's are not counted)
  int max_position = 0;     // highest RoPE position any key had
  double catalyst_s = 0;    // running the catalyst prompt (CaP)
  double novelty_s = 0;     // per-token NLL of what was read (NuC)
  double compact_s = 0;     // selection, compaction and re-rotation
};

class MemoryPot {
 public:
  // Resolves keep (0 -> default) and checks the layout fits; throws std::invalid_argument
  // naming the flag to change. Returns the options with keep filled in.
  static PotOptions resolve(PotOptions opts, const PotLayout& layout);
  // Device bytes the pot needs beyond its K/V (category pot_scoring).
  static uint64_t scoring_bytes(const LlamaConfig& cfg, int capacity, bool half);

  MemoryPot(cl::Context& ctx, Forward& forward, KvStore& kv, const LlamaConfig& cfg, const PotOptions& opts);

  // Empties the pot and reads the pinned prefix. catalyst: the CaP tokens (may be empty for
  // the recent policy).
  void begin(const std::vector<TokenId>& pinned, const std::vector<TokenId>& catalyst);
  // Reads text, distilling whenever the next chunk would not fit beside the catalyst.
  // next: the token after these (scores the last one's successor), or -1. still_to_come:
  // tokens finish() will append after these; while everything left fits the free slots,
  // no room is held back for the catalyst, so a prompt that fits the pot is never distilled.
  void read(const std::vector<TokenId>& tokens, TokenId next, int still_to_come = 0);
  // Makes sure n more tokens fit without another distillation (distilling once if needed),
  // then appends `tokens` (n >= tokens.size(): the rest is room for the answer).
  void finish(const std::vector<TokenId>& tokens, int n);
  // One generated token into the next slot (decoding; never distills: finish() made room).
  void append(TokenId token);
  // One CCD cycle (CaP, NuC, selection, compaction, CR-RoPE). No-op when size <= keep.
  void distill();

  const PotOptions& options() const { return opts_; }
  const PotStats& stats() const { return stats_; }
  int pinned() const { return pinned_; }
  int nuc_slots() const;
  // Stream index (0 = first pinned token) of the token in each slot of (layer, KV head).
  std::vector<int> sources(int layer, int head) const;

 private:
  void eval_chunk(const std::vector<TokenId>& tokens, size_t from, int n, TokenId next, bool score);
  size_t at(int layer, int head, int slot) const { return (size_t(layer) * cfg_.n_head_kv + head) * opts_.capacity + slot; }

  cl::Context& ctx_;
  Forward& fwd_;
  KvStore& kv_;
  LlamaConfig cfg_;
  PotOptions opts_;
  std::vector<TokenId> catalyst_;
  int pinned_ = 0;
  int stream_pos_ = 0;   // stream index of the next token read
  bool decoding_ = false;  // append() is evaluating an answer token
  float pending_nuc_;    // NuC of the next token read (from the last row of the previous chunk)
  cl::Buffer mass_;      // [n_layer][n_kv_heads][capacity] CaP attention mass
  // Host-side, per [n_layer][n_kv_heads][capacity] slot:
  std::vector<float> nuc_;      // novelty of the token in the slot
  std::vector<int> source_;     // its stream index
  std::vector<int> position_;   // the RoPE position its key is rotated to
  PotStats stats_;
};

}  // namespace infinipot
