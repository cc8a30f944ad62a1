// The memory pot: InfiniPot's Continual Context Distillation (CCD) over a fixed KV store.
//
// A stream is read into a pot of `capacity` KV entries. The first tokens (the chat template's
// prefix, as many as the policy pins) stay for good. Whenever the next text would leave no
// room for the catalyst prompt, the pot distills, with one pipeline for every policy
// (pot/policy.h, chosen by name from pot/policy_registry.h):
//   1. Measure what the policy needs (PolicyNeeds):
//      CaP: the catalyst prompt runs after the pot's content; the attention its question rows
//        pay each entry, per layer and KV head, is summed (Forward's EvalOptions::mass); its
//        own entries are dropped again afterwards: it is never part of the context;
//      NuC: every token got a novelty score when it was read, -log p(token | pot before it);
//      H2O: attention accumulated from every query since the entry was read;
//      TOVA: the attention the last token read pays (it is re-run once to measure it).
//   2. Select (PotPolicy::select): `keep` survivors per layer and KV head.
//   3. Compaction: survivors move to the front of their head, in order (KvStore::compact).
//   4. Positions (pot/positions.h): by default CR-RoPE re-rotates each survivor's key to
//      position = its new slot, so the pot's positions stay 0 .. size-1; `stream` keeps the
//      positions as read, `fit` keeps them until they would leave the trained context,
//      `gaps` caps every distance between kept neighbours.
// Reading then goes on into the freed slots. See docs/pot.md.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model_loader/tokenizer.h"
#include "runtime/kv_store.h"
#include "pot/device_choice.h"
#include "pot/policy.h"
#include "pot/positions.h"
#include "pot/pot_snapshot.h"
#include "runtime/context.h"
#include "runtime/forward.h"

namespace infinipot {

struct PotOptions {
  int capacity = 0;        // |M|: KV entries the pot holds
  int keep = 0;            // |C|: entries left after a distillation, pinned prefix included (0: capacity / 2)
  // --keep auto: each distillation keeps as many entries as its scores justify, the fewest
  // holding keep_mass of their combined mass (pot/selection.h keep_by_mass), at least a
  // quarter of the pot and at most `keep` (default then: three quarters of the pot).
  bool keep_auto = false;
  float keep_mass = kDefaultKeepMass;
  static constexpr float kDefaultKeepMass = 0.9f;
  std::string policy = "infinipot";  // pot/policy_registry.h
  PolicyParams params;     // what shapes the policy's choice (nuc_ratio, pool, recent, per_head, ...)
  // Where kept entries' positions go at a distillation (pot/positions.h): reset is CR-RoPE;
  // auto becomes the model's rule when the pot is made (options() then names that rule).
  PositionRule positions = PositionRule::Auto;
  int position_gap = kDefaultPositionGap;  // gaps: the widest distance a cut leaves between kept neighbours
  // The choice runs on the device (pot/device_choice.h); false: on the host (the reference).
  // The oracle (diagnostics) always runs on the host.
  bool device_select = true;
  // CaP counts the attention of the catalyst's question rows only, not of the chat template's
  // tail after them (which attends to the template, not to the facts). false: every row.
  bool cap_question_rows = true;
  // CaP's catalyst runs in the forward pass of the chunk before a distillation when it fits
  // (MemoryPot::read); false: always in a pass of its own (tests compare the two).
  bool fuse_catalyst = true;
};

// The token counts a pot has to fit, known before any device work.
struct PotLayout {
  int pinned = 0;     // chat prefix tokens the policy pins (never evicted)
  int catalyst = 0;   // catalyst prompt tokens (0 for policies without CaP)
  int body = 0;       // document tokens, read with distillation
  int final_tokens = 0;  // question + template tail + answer: appended with no distillation
  int answer = 0;        // of final_tokens: the answer's (n_predict)
};

struct PotStats {
  int cycles = 0;           // distillations run
  long long tokens_read = 0;  // prompt tokens (the answer's are not counted)
  int max_position = 0;     // highest RoPE position any key had
  int repositioned = 0;     // distillations that moved kept keys to new positions
  double catalyst_s = 0;    // running the catalyst prompt (CaP; in a fused chunk, its rows' share)
  int catalyst_fused = 0;   // catalysts that ran in the pass of the chunk before their distillation
  double novelty_s = 0;     // per-token NLL of what was read (NuC)
  double compact_s = 0;     // selection, compaction and re-rotation
  long long kept_total = 0;  // entries the distillations kept, summed (--keep auto varies them)
  int kept_least = 0, kept_most = 0;  // the fewest and the most one distillation kept
};

class MemoryPot {
 public:
  // Resolves keep (0 -> default) and checks the layout fits; throws std::invalid_argument
  // naming the flag to change. Returns the options with keep filled in.
  static PotOptions resolve(PotOptions opts, const PotLayout& layout);
  // Device bytes the pot needs beyond its K/V (category kv_selection).
  static uint64_t scoring_bytes(const LlamaConfig& cfg, int capacity, bool half, const PotOptions& opts);
  // The policy's needs and pinned prefix, for a layout check before any device work.
  static PolicyNeeds needs_of(const PotOptions& opts);
  static int pinned_of(const PotOptions& opts, int prefix);
  // A model with sliding-window layers runs the catalyst prompt as one chunk (the local store
  // has room for one chunk past its window, and takes the catalyst back after): throws
  // std::invalid_argument naming --chunk when it is longer. No-op for other models.
  static void check_catalyst_fits_chunk(const LlamaConfig& cfg, int catalyst_tokens, int chunk);

  MemoryPot(cl::Context& ctx, Forward& forward, KvStore& kv, const LlamaConfig& cfg, const Tokenizer& tokenizer,
            const PotOptions& opts);
  ~MemoryPot();

  // Empties the pot and reads the chat prefix (the policy pins its first pinned_of() tokens).
  // catalyst: the CaP tokens (empty for policies without CaP); its first question_rows
  // tokens are the question whose attention counts (0: all of them).
  void begin(const std::vector<TokenId>& prefix, const std::vector<TokenId>& catalyst, int question_rows = 0);
  // Reads text, distilling whenever the next chunk would not fit beside the catalyst.
  // next: the token after these (scores the last one's successor), or -1. still_to_come:
  // tokens finish() will append after these; while everything left fits the free slots,
  // no room is held back for the catalyst, so a prompt that fits the pot is never distilled.
  void read(const std::vector<TokenId>& tokens, TokenId next, int still_to_come = 0);
  // Makes sure n more tokens fit without another distillation (distilling once if needed),
  // then appends `tokens` (n >= tokens.size(): the rest is room for the answer).
  void finish(const std::vector<TokenId>& tokens, int n);
  // Another catalyst from now on (a conversation's newest turn): checked as begin() checks it.
  void set_catalyst(const std::vector<TokenId>& catalyst, int question_rows = 0);
  const std::vector<TokenId>& catalyst() const { return catalyst_; }
  // One generated token into the next slot (decoding; never distills: finish() made room).
  void append(TokenId token);
  // One CCD cycle (measure, select, compact, CR-RoPE). No-op when size <= keep. most: the
  // most entries this cycle may keep (finish() leaving room for the answer; 0: keep).
  void distill(int most = 0);
  // The fewest entries a distillation keeps under --keep auto (keep itself otherwise).
  int keep_floor() const;
  const PolicyNeeds& needs() const { return needs_; }
  // Diagnostics (run --pot-oracle): the stream tokens [first, last] survive every distillation
  // in every layer and head, whatever the policy chooses; (-1, -1) turns it off.
  void set_oracle(int first, int last) { oracle_ = {first, last}; }
  // Diagnostics (--pot-watch-attention): the catalyst's attention to each entry of the pot as
  // it stands, measured as CaP measures it (its question rows), [layer][KV head][capacity], the
  // first size() slots of each meaningful. The pot is left exactly as it was (the attention
  // record a distillation reads included). Empty without a catalyst, or when the catalyst
  // does not fit beside the entries.
  std::vector<float> catalyst_attention();
  // Called by read() after each chunk with the tokens of that call read so far (progress
  // lines); empty: none.
  void set_on_chunk(std::function<void(int)> f) { on_chunk_ = std::move(f); }

  // Snapshots (pot/pot_snapshot.h; pot/memory_pot_snapshot.cpp). capture: the pot's whole state
  // after reading `tokens` (prefix + document), tagged with the model's identity. restore:
  // the state of a snapshot taken with the same model and options (checked by the caller:
  // check_snapshot), then the catalyst for the next question; the pot then reads on or
  // answers (finish) exactly as the pot that was saved would have.
  PotSnapshot capture(const std::vector<int>& tokens, const std::string& model_id) const;
  void restore(const PotSnapshot& snap, const std::vector<TokenId>& catalyst, int question_rows = 0);
  // The options as a snapshot records them, and back (throws std::invalid_argument naming a bad field).
  static nlohmann::json settings_json(const PotOptions& opts);
  static PotOptions options_from_settings(const nlohmann::json& settings);

  const PotOptions& options() const { return opts_; }
  const PotStats& stats() const { return stats_; }
  int pinned() const { return pinned_; }
  // A fingerprint of what the pot holds: per (layer, KV head) slot, the stream index, RoPE
  // position and NuC score of its entry (FNV-1a). Two runs that end with the same pot agree.
  uint64_t digest() const;
  // Stream index (0 = first pinned token) of the token in each slot of (layer, KV head).
  std::vector<int> sources(int layer, int head) const;
  // The RoPE position of each of its entries' keys, slot by slot.
  std::vector<int> positions(int layer, int head) const;

 private:
  // with_catalyst: the catalyst prompt rides along after the chunk's rows in the same
  // forward pass (the chunk after which the pot distills; see read()): its question rows'
  // attention is CaP's measure, exactly what measure_catalyst() would take next, and its
  // entries are dropped again.
  void eval_chunk(const std::vector<TokenId>& tokens, size_t from, int n, TokenId next, bool score,
                  bool with_catalyst = false);
  void measure_catalyst();
  // The policy's plan run on the device: the scores stay there, the survivor list of each
  // group (a layer, a head, or all of them) comes back. Returns [n_layer][n_kv_heads][keep].
  std::vector<int> choose_on_device(const PotScores& sc, const ChoicePlan& plan);
  void measure_last_query();
  // The positions survivors ([n_layer][n_kv_heads][keep]) take under opts_.positions, in the
  // same layout, and the position of the next token.
  std::vector<int> new_positions(const std::vector<int>& survivors, int keep, int* next_position) const;
  // Moves a host-side per-slot record along with the survivors of one layer.
  template <typename T>
  void carry(std::vector<T>& record, int layer, const std::vector<int>& survivors, int keep, const std::vector<int>* add = nullptr);
  size_t at(int layer, int head, int slot) const { return (size_t(layer) * cfg_.n_head_kv + head) * opts_.capacity + slot; }

  cl::Context& ctx_;
  Forward& fwd_;
  KvStore& kv_;
  LlamaConfig cfg_;
  PotOptions opts_;
  std::unique_ptr<PotPolicy> policy_;
  PolicyNeeds needs_;
  std::vector<TokenId> catalyst_;
  int question_rows_ = 0;  // catalyst rows whose attention counts
  // The catalyst rows CaP evaluates: its question rows where only they count (the rows after
  // them cannot change their attention, the pass being causal), else all of it.
  int cap_rows() const { return question_rows_ > 0 ? question_rows_ : static_cast<int>(catalyst_.size()); }
  bool cap_measured_ = false;  // mass_ holds CaP's measure of the pot as it is (set by a fused chunk)
  TokenId last_token_ = -1;  // the last token read (TOVA re-runs it)
  int last_unit_ = -1;       // its word / digit run
  std::pair<int, int> oracle_{-1, -1};
  std::function<void(int)> on_chunk_;
  std::unique_ptr<DeviceChoice> choice_;  // device selection (null: host)
  // Device copies the choice reads, [n_layer][n_kv_heads][capacity]: novelty, word runs,
  // H2O's carried sums (uploaded once per cycle), and the survivors it writes.
  cl::Buffer nuc_dev_, unit_dev_, acc_dev_, survivors_dev_;
  std::vector<unsigned char> token_edges_;  // per vocabulary id: how its text starts and ends (letter/digit, punctuation, spaces only)
  int pinned_ = 0;
  int stream_pos_ = 0;   // stream index of the next token read
  bool decoding_ = false;  // append() is evaluating an answer token
  float pending_nuc_;    // NuC of the next token read (from the last row of the previous chunk)
  // [n_layer][n_kv_heads][capacity] attention mass: the catalyst's (CaP), the last token's
  // (TOVA) or accumulated over every query (H2O); a policy needs at most one of them.
  cl::Buffer mass_;
  // Host-side, per [n_layer][n_kv_heads][capacity] slot:
  std::vector<float> nuc_;      // novelty of the token in the slot
  std::vector<float> acc_;      // H2O: accumulated attention (carried through compactions)
  std::vector<int> source_;     // its stream index
  std::vector<int> unit_;       // stream index where its word / digit run starts
  std::vector<int> position_;   // the RoPE position its key is rotated to
  PotStats stats_;
};

}  // namespace infinipot
