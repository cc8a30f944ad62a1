// The KV stores the layers attend to. This is the interface the memory pot implements:
// a plain full cache here; the pot (InfiniPot CCD) adds scoring and compaction on top.
//
// A store holds the layers of one attention kind (KvKind):
//   Global: the layers with global attention (every layer of llama): the full cache, or the
//     pot's |M| entries. The engine and the pot see only this store.
//   Local: the sliding-window layers (gemma3's five of six), owned by the forward pass. It
//     holds the last `sliding_window` entries plus one chunk and slides (slide()) before a
//     chunk would overflow it, so it never grows with the input and is never scored.
// Layout, per layer of the store (one K and one V buffer each):
//   keys, values: [n_kv_heads][capacity][head_dim] fp32, or fp16 (half the memory; arithmetic
//   stays fp32) when the store is created with half = true
// Slots 0 .. size()-1 are filled in every layer and head. Keys are stored rotated at their
// position; because R(p + d) = R(d) R(p), re-rotating by a delta (rerotate) gives exactly
// the key a token would have had at its new position, so compaction can re-assign positions
// (CR-RoPE) without keeping pre-RoPE copies. Each KV head may hold different tokens in the
// same slot after compact(), since InfiniPot scores per head.
#pragma once
#include <vector>
#include "model_loader/model_config.h"
#include "runtime/context.h"

namespace infinipot {

enum class KvKind { Global, Local };

class KvStore {
 public:
  KvStore(cl::Context& ctx, const LlamaConfig& cfg, int capacity, bool half = false, KvKind kind = KvKind::Global);
  // The model layers a store of this kind holds, in order.
  static std::vector<int> layers_of(const LlamaConfig& cfg, KvKind kind);
  static uint64_t bytes_needed(const LlamaConfig& cfg, int capacity, bool half = false, KvKind kind = KvKind::Global);
  // Device bytes compact() and rerotate() hold once used (category kv_selection for the
  // global store, kv_cache for the local one): a spare of one layer's K or V, the per-head
  // slot and delta lists, and the delta list's rotation table.
  static uint64_t compaction_bytes(const LlamaConfig& cfg, int capacity, bool half = false);
  // Capacity of the local store for chunks of up to max_chunk tokens: the window behind a
  // chunk's first query, plus the chunk.
  static int window_capacity(const LlamaConfig& cfg, int max_chunk) { return cfg.sliding_window + max_chunk; }
  bool half() const { return half_; }
  KvKind kind() const { return kind_; }

  int capacity() const { return capacity_; }
  int size() const { return size_; }
  int free_slots() const { return capacity_ - size_; }
  int n_layers() const { return static_cast<int>(keys_.size()); }
  // Store layer index of a model layer (-1: the other kind's store holds it).
  int index_of(int model_layer) const { return index_.at(static_cast<size_t>(model_layer)); }
  // Buffers by store layer index (0 .. n_layers()-1), not by model layer.
  cl::Buffer& keys(int layer) { return keys_.at(layer); }
  cl::Buffer& values(int layer) { return values_.at(layer); }

  // RoPE position of the next token appended (full cache: the number of tokens seen).
  int next_position() const { return next_position_; }
  // Called by the forward pass after it wrote n tokens into slots size() .. size()+n-1.
  void commit(int n_tokens);
  void reset();
  // How many times reset() was called: the forward pass restarts the local store when the
  // global one was reset (a new sequence) without every caller having to know it exists.
  int resets() const { return resets_; }

  // Pot operations (per store layer; every KV head keeps n_keep entries):
  // keep: [n_kv_heads][n_keep] source slots, ascending per head. Survivors move to slots
  // 0 .. n_keep-1 of their head; size() becomes n_keep once every layer is compacted.
  // compact() and rerotate() only enqueue: the in-order queue runs them before anything
  // later reads the store; a caller timing them calls the context's finish().
  void compact(int layer, const std::vector<int>& keep, int n_keep);
  // delta: [n_kv_heads][capacity] position change of each entry's key (slots >= size() ignored).
  void rerotate(int layer, const std::vector<int>& delta);
  void set_size(int n, int next_position);
  // Local store: keeps the newest keep_last entries in every layer, moved to slots
  // 0 .. keep_last-1 and re-rotated back by the shift, so slot == position stays true (the
  // attention kernel applies the window by slot) and positions stay below capacity().
  void slide(int keep_last);

 private:
  cl::Context& ctx_;
  LlamaConfig cfg_;
  int capacity_;
  bool half_;
  KvKind kind_;
  float rope_theta_;  // RoPE base of this kind's layers (rerotate)
  int size_ = 0;
  int next_position_ = 0;
  int resets_ = 0;
  std::vector<int> index_;          // [n_layer] store index of each model layer, or -1
  std::vector<cl::Buffer> keys_;    // n_layers x [n_kv_heads][capacity][head_dim]
  std::vector<cl::Buffer> values_;  // n_layers x [n_kv_heads][capacity][head_dim]
  // The global store allocates these on first use (the pot plans for them; a plain cache
  // never needs them); the local store at once (it slides from the first long input on).
  cl::Buffer compact_tmp_;          // [n_kv_heads][capacity][head_dim]: the spare a layer gathers into
  cl::Buffer slots_;                // [n_kv_heads][capacity] int: survivors
  cl::Buffer delta_;                // [n_kv_heads][capacity] int: position change
  cl::Buffer angles_;               // [n_kv_heads][capacity][n_rot/2] float2: (cos, sin) of delta_
  cl::Buffer freq_factors_;         // [n_rot/2] float: each pair's angle divisor (Llama 3), else 1
  std::vector<int> slots_of_;       // the keep list slots_ holds (empty: none)
  std::vector<int> angles_of_;      // the delta list angles_ was computed from (empty: none)
  int angles_slots_ = 0;            // and its slot count
  void ensure_compaction_buffers();
};

}  // namespace infinipot
