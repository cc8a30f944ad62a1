// The KV store every layer attends to. This is the interface the memory pot implements:
// a plain full cache here; the pot (InfiniPot CCD) adds scoring and compaction on top.
//
// Layout, per layer (one K and one V buffer each):
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

class KvStore {
 public:
  KvStore(cl::Context& ctx, const LlamaConfig& cfg, int capacity, bool half = false);
  static uint64_t bytes_needed(const LlamaConfig& cfg, int capacity, bool half = false);
  // Device bytes compact() and rerotate() hold once used (category pot_scoring): a copy of one
  // layer's K or V and the per-head slot and delta lists.
  static uint64_t compaction_bytes(const LlamaConfig& cfg, int capacity, bool half = false);
  bool half() const { return half_; }

  int capacity() const { return capacity_; }
  int size() const { return size_; }
  int free_slots() const { return capacity_ - size_; }
  int n_layers() const { return static_cast<int>(keys_.size()); }
  cl::Buffer& keys(int layer) { return keys_.at(layer); }
  cl::Buffer& values(int layer) { return values_.at(layer); }

  // RoPE position of the next token appended (full cache: the number of tokens seen).
  int next_position() const { return next_position_; }
  // Called by the forward pass after it wrote n tokens into slots size() .. size()+n-1.
  void commit(int n_tokens);
  void reset();

  // Pot operations (per layer; every KV head keeps n_keep entries):
  // keep: [n_kv_heads][n_keep] source slots, ascending per head. Survivors move to slots
  // 0 .. n_keep-1 of their head; size() becomes n_keep once every layer is compacted.
  void compact(int layer, const std::vector<int>& keep, int n_keep);
  // delta: [n_kv_heads][capacity] position change of each entry's key (slots >= size() ignored).
  void rerotate(int layer, const std::vector<int>& delta);
  void set_size(int n, int next_position);

 private:
  cl::Context& ctx_;
  LlamaConfig cfg_;
  int capacity_;
  bool half_;
  int size_ = 0;
  int next_position_ = 0;
  std::vector<cl::Buffer> keys_;    // n_layer x [n_kv_heads][capacity][head_dim]
  std::vector<cl::Buffer> values_;  // n_layer x [n_kv_heads][capacity][head_dim]
  // Allocated on first use (the pot plans for them; a plain cache never needs them).
  cl::Buffer compact_tmp_;          // [n_kv_heads][capacity][head_dim]: gather source
  cl::Buffer slots_;                // [n_kv_heads][capacity] int: survivors
  cl::Buffer delta_;                // [n_kv_heads][capacity] int: position change
  void ensure_compaction_buffers();
};

}  // namespace infinipot
