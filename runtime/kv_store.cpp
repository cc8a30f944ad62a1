#include "runtime/kv_store.h"

#include <string>
#include <utility>

#include "runtime/cl_error.h"
#include "runtime/ops/kv_cache.h"
#include "runtime/ops/rope.h"

namespace infinipot {

std::vector<int> KvStore::layers_of(const LlamaConfig& cfg, KvKind kind) {
  std::vector<int> out;
  for (int l = 0; l < cfg.n_layer; ++l)
    if ((!cfg.layer_kind.empty() && cfg.is_local(l)) == (kind == KvKind::Local)) out.push_back(l);
  return out;
}

uint64_t KvStore::bytes_needed(const LlamaConfig& cfg, int capacity, bool half, KvKind kind) {
  const uint64_t layers = layers_of(cfg, kind).size();
  return 2ull * layers * cfg.n_head_kv * static_cast<uint64_t>(capacity) * cfg.head_dim * (half ? 2 : 4);
}

uint64_t KvStore::compaction_bytes(const LlamaConfig& cfg, int capacity, bool half) {
  const uint64_t per_head = static_cast<uint64_t>(capacity) * cfg.n_head_kv;
  return per_head * cfg.head_dim * (half ? 2 : 4) + 2 * per_head * sizeof(int) +
         ops::rope_shift_table_bytes(cfg.n_head_kv, capacity, cfg.n_rot) + size_t(cfg.n_rot / 2) * sizeof(float);
}

void KvStore::ensure_compaction_buffers() {
  if (compact_tmp_) return;
  auto& mem = ctx_.memory();
  const size_t per_head = size_t(cfg_.n_head_kv) * capacity_;
  const bool local = kind_ == KvKind::Local;
  const auto category = local ? cl::MemCategory::KvCache : cl::MemCategory::KvSelection;
  const std::string prefix = local ? "kv_window." : "pot.";
  compact_tmp_ = mem.alloc(category, keys_.at(0).bytes(), prefix + "compact_copy");
  slots_ = mem.alloc(category, per_head * sizeof(int), prefix + "survivors");
  delta_ = mem.alloc(category, per_head * sizeof(int), prefix + "position_delta");
  angles_ = mem.alloc(category, ops::rope_shift_table_bytes(cfg_.n_head_kv, capacity_, cfg_.n_rot), prefix + "delta_angles");
  // The angle divisors of this kind's layers: Llama 3's factors on the global layers, else 1.
  std::vector<float> factors(size_t(cfg_.n_rot / 2), 1.0f);
  if (!local && !cfg_.rope_freq_factors.empty()) factors = cfg_.rope_freq_factors;
  freq_factors_ = mem.alloc(category, factors.size() * sizeof(float), prefix + "rope_freq_factors");
  ctx_.write(freq_factors_, factors.data(), factors.size() * sizeof(float));
}

KvStore::KvStore(cl::Context& ctx, const LlamaConfig& cfg, int capacity, bool half, KvKind kind)
    : ctx_(ctx), cfg_(cfg), capacity_(capacity), half_(half), kind_(kind),
      rope_theta_(kind == KvKind::Local ? cfg.rope_theta_local : cfg.rope_theta) {
  if (capacity <= 0) throw cl::ClError("KV capacity must be positive, got " + std::to_string(capacity));
  const std::vector<int> layers = layers_of(cfg, kind);
  if (layers.empty()) throw cl::ClError("KV store: the model has no layers of this attention kind");
  const size_t bytes = size_t(cfg.n_head_kv) * capacity * cfg.head_dim * (half ? 2 : 4);
  const std::string name = kind == KvKind::Local ? "kv_window." : "kv.";
  index_.assign(size_t(cfg.n_layer), -1);
  for (int l : layers) {  // buffers named by model layer
    index_[size_t(l)] = static_cast<int>(keys_.size());
    keys_.push_back(ctx.memory().alloc(cl::MemCategory::KvCache, bytes, name + "k." + std::to_string(l)));
    values_.push_back(ctx.memory().alloc(cl::MemCategory::KvCache, bytes, name + "v." + std::to_string(l)));
  }
  if (kind == KvKind::Local) ensure_compaction_buffers();
}

void KvStore::commit(int n_tokens) {
  if (size_ + n_tokens > capacity_)
    throw cl::ClError("KV store overflow: " + std::to_string(size_ + n_tokens) + " entries for capacity " +
                      std::to_string(capacity_));
  size_ += n_tokens;
  next_position_ += n_tokens;
}

void KvStore::reset() {
  ++resets_;
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
  ensure_compaction_buffers();
  // Layers that keep the same entries (the pot's shared choice) reuse the list on the device.
  // The queue is in order, so no layer needs to wait for the one before: one clFinish (the
  // caller's, or the next read) covers the whole distillation.
  if (keep != slots_of_) {
    ctx_.write(slots_, keep.data(), keep.size() * sizeof(int));
    slots_of_ = keep;
  }
  // Gathering in place could overwrite a slot before it is read: gather into the spare
  // buffer and take it as the layer's, the old one becoming the spare (no copy back).
  for (cl::Buffer* buf : {&keys_[layer], &values_[layer]}) {
    ops::kv_gather(ctx_, *buf, compact_tmp_, cfg_.n_head_kv, capacity_, cfg_.head_dim, slots_, n_keep, half_);
    std::swap(*buf, compact_tmp_);
  }
}

void KvStore::rerotate(int layer, const std::vector<int>& delta) {
  if (delta.size() != size_t(cfg_.n_head_kv) * capacity_)
    throw cl::ClError("KV rerotate: delta must be [n_kv_heads][capacity]");
  ensure_compaction_buffers();
  if (delta != angles_of_ || size_ != angles_slots_) {  // layers with the same list reuse its angles
    ctx_.write(delta_, delta.data(), delta.size() * sizeof(int));
    ops::rope_shift_angles(ctx_, delta_, cfg_.n_head_kv, capacity_, cfg_.n_rot, size_, rope_theta_, freq_factors_,
                           angles_);
    angles_of_ = delta;
    angles_slots_ = size_;
  }
  ops::rope_shift(ctx_, keys_[layer], cfg_.n_head_kv, capacity_, cfg_.head_dim, cfg_.n_rot, delta_, size_, angles_, half_);
}

void KvStore::slide(int keep_last) {
  const int shift = size_ - keep_last;
  if (shift <= 0) return;
  std::vector<int> keep(size_t(cfg_.n_head_kv) * keep_last);
  for (int h = 0; h < cfg_.n_head_kv; ++h)
    for (int j = 0; j < keep_last; ++j) keep[size_t(h) * keep_last + j] = shift + j;
  for (int l = 0; l < n_layers(); ++l) compact(l, keep, keep_last);
  // Positions restart at 0: a key at position p moves to p - shift (exact by R(p+d) = R(d) R(p)),
  // so the local RoPE angles stay small whatever the stream's length.
  set_size(keep_last, keep_last);
  const std::vector<int> delta(size_t(cfg_.n_head_kv) * capacity_, -shift);
  for (int l = 0; l < n_layers(); ++l) rerotate(l, delta);
}

}  // namespace infinipot
