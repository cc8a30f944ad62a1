#include "runtime/kv_store.h"

#include <string>

#include "runtime/cl_error.h"
#include "runtime/ops.h"

namespace infinipot {

uint64_t KvStore::bytes_needed(const LlamaConfig& cfg, int capacity, bool half) {
  return 2ull * cfg.n_layer * cfg.n_head_kv * static_cast<uint64_t>(capacity) * cfg.head_dim * (half ? 2 : 4);
}

uint64_t KvStore::compaction_bytes(const LlamaConfig& cfg, int capacity, bool half) {
  const uint64_t per_head = static_cast<uint64_t>(capacity) * cfg.n_head_kv;
  return per_head * cfg.head_dim * (half ? 2 : 4) + 2 * per_head * sizeof(int);
}

void KvStore::ensure_compaction_buffers() {
  if (compact_tmp_) return;
  auto& mem = ctx_.memory();
  const size_t per_head = size_t(cfg_.n_head_kv) * capacity_;
  compact_tmp_ = mem.alloc(cl::MemCategory::PotScoring, keys_.at(0).bytes(), "pot.compact_copy");
  slots_ = mem.alloc(cl::MemCategory::PotScoring, per_head * sizeof(int), "pot.survivors");
  delta_ = mem.alloc(cl::MemCategory::PotScoring, per_head * sizeof(int), "pot.position_delta");
}

KvStore::KvStore(cl::Context& ctx, const LlamaConfig& cfg, int capacity, bool half)
    : ctx_(ctx), cfg_(cfg), capacity_(capacity), half_(half) {
  if (capacity <= 0) throw cl::ClError("KV capacity must be positive, got " + std::to_string(capacity));
  const size_t bytes = size_t(cfg.n_head_kv) * capacity * cfg.head_dim * (half ? 2 : 4);
  for (int l = 0; l < cfg.n_layer; ++l) {
    keys_.push_back(ctx.memory().alloc(cl::MemCategory::KvCache, bytes, "kv.k." + std::to_string(l)));
    values_.push_back(ctx.memory().alloc(cl::MemCategory::KvCache, bytes, "kv.v." + std::to_string(l)));
  }
}

void KvStore::commit(int n_tokens) {
  if (size_ + n_tokens > capacity_)
    throw cl::ClError("KV store overflow: " + std::to_string(size_ + n_tokens) + " entries for capacity " +
                      std::to_string(capacity_));
  size_ += n_tokens;
  next_position_ += n_tokens;
}

void KvStore::reset() {
  size_ = 0;
  next_position_ = 0;
}

void KvStore::set_size(int n, int next_position) {
  if (n < 0 || n > capacity_) throw cl::ClError("KV store: size " + std::to_string(n) + " out of range");
  size_ = n;
  next_position_ = next_position;
}

void KvStore::compact(int layer, const std::vector<int>& keep, int n_keep) {
  if (n_keep < 0 || n_keep > size_ || keep.size() != size_t(cfg_.n_head_kv) * n_keep)
    throw cl::ClError("KV compact: keep list does not match [n_kv_heads][n_keep]");
  for (int s : keep)
    if (s < 0 || s >= size_) throw cl::ClError("KV compact: slot " + std::to_string(s) + " is not filled");
  if (n_keep == 0) return;
  // Gathering in place could overwrite a slot before it is read, so go through a copy.
  ensure_compaction_buffers();
  const size_t bytes = keys_[layer].bytes();
  ctx_.write(slots_, keep.data(), keep.size() * sizeof(int));
  for (cl::Buffer* buf : {&keys_[layer], &values_[layer]}) {
    ctx_.copy(*buf, compact_tmp_, bytes);
    ops::kv_gather(ctx_, compact_tmp_, *buf, cfg_.n_head_kv, capacity_, cfg_.head_dim, slots_, n_keep, half_);
  }
  ctx_.finish();
}

void KvStore::rerotate(int layer, const std::vector<int>& delta) {
  if (delta.size() != size_t(cfg_.n_head_kv) * capacity_)
    throw cl::ClError("KV rerotate: delta must be [n_kv_heads][capacity]");
  ensure_compaction_buffers();
  ctx_.write(delta_, delta.data(), delta.size() * sizeof(int));
  ops::rope_shift(ctx_, keys_[layer], cfg_.n_head_kv, capacity_, cfg_.head_dim, cfg_.n_rot, delta_, size_, cfg_.rope_theta,
                  half_);
  ctx_.finish();
}

}  // namespace infinipot
