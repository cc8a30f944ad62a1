#include "runtime/model_weights.h"

#include <algorithm>
#include <string>
#include <vector>

#include "model_loader/quant.h"
#include "runtime/cl_error.h"
#include "runtime/weight_layout.h"

namespace infinipot {
namespace {

// Row order of one head that turns NEOX pairs (i, i + n_rot/2) into adjacent ones (2i, 2i+1):
// new row r of the head is old row order[r]; rows past n_rot keep their place.
std::vector<int> neox_to_adjacent(int head_dim, int n_rot) {
  std::vector<int> order(static_cast<size_t>(head_dim));
  for (int r = 0; r < head_dim; ++r) order[r] = r;
  for (int i = 0; i < n_rot / 2; ++i) {
    order[2 * i] = i;
    order[2 * i + 1] = i + n_rot / 2;
  }
  return order;
}

// Reorders the rows of every head of a [rows][row_bytes] matrix (rows = heads * order.size()).
void permute_head_rows(std::vector<uint8_t>& data, size_t row_bytes, const std::vector<int>& order) {
  const std::vector<uint8_t> src = data;
  const size_t hd = order.size(), heads = data.size() / row_bytes / hd;
  for (size_t h = 0; h < heads; ++h)
    for (size_t r = 0; r < hd; ++r)
      std::copy_n(src.begin() + static_cast<std::ptrdiff_t>((h * hd + order[r]) * row_bytes), row_bytes,
                  data.begin() + static_cast<std::ptrdiff_t>((h * hd + r) * row_bytes));
}

// Uploads the row-wise concatenation of tensors sharing type and row length. `head_order`
// (when not empty) reorders the rows within each head of the parts marked in `permute`.
// Where the device shares the host's DRAM (WeightPlace::InPlace), the file is read straight
// into the mapped buffer and its pages dropped from the page cache: the weights are in DRAM
// once, not as page cache plus buffer, and no staging copy is made. Elsewhere they go through
// a staging copy and a write. Both read with checked reads, so a truncated file is an error.
ops::DeviceWeight upload_rows(cl::Context& ctx, const gguf::GgufFile& file, WeightPlace place,
                              const std::vector<const gguf::TensorInfo*>& parts, const std::string& label,
                              const std::vector<int>& head_order = {}, const std::vector<bool>& permute = {}) {
  const gguf::TensorInfo& t0 = *parts.front();
  ops::DeviceWeight w;
  w.type = t0.type;
  w.cols = static_cast<int>(t0.shape.at(0));
  w.row_bytes = static_cast<int>(quant::row_bytes(t0.type, w.cols));
  if (w.cols % 32 != 0)
    throw cl::ClError("tensor '" + t0.name + "': row length " + std::to_string(w.cols) +
                      " is not a multiple of 32, which the device kernels need");
  uint64_t bytes = 0;
  for (const auto* t : parts) {
    w.rows += static_cast<int>(t->rows());
    bytes += t->n_bytes;
  }
  const bool in_place = place == WeightPlace::InPlace;
  w.buf = ctx.memory().alloc(cl::MemCategory::Weights, bytes, label, in_place);
  if (in_place) {
    cl::Context::MappedWrite mapped = ctx.map_write(w.buf, bytes);
    uint64_t offset = 0;
    std::vector<uint8_t> rows;
    for (size_t p = 0; p < parts.size(); ++p) {
      const gguf::TensorInfo* t = parts[p];
      uint8_t* dst = mapped.data() + offset;
      file.read_tensor(*t, dst, 0, t->n_bytes);
      if (!head_order.empty() && permute.at(p)) {
        rows.assign(dst, dst + t->n_bytes);
        permute_head_rows(rows, static_cast<size_t>(w.row_bytes), head_order);
        std::copy(rows.begin(), rows.end(), dst);
      }
      cl::to_device_layout(w.type, dst, t->rows(), static_cast<size_t>(w.row_bytes));
      file.drop_cached(*t);
      offset += t->n_bytes;
    }
    mapped.unmap();
    return w;
  }
  uint64_t offset = 0;
  std::vector<uint8_t> staging;
  for (size_t p = 0; p < parts.size(); ++p) {
    const gguf::TensorInfo* t = parts[p];
    staging.resize(t->n_bytes);
    file.read_tensor(*t, staging.data(), 0, t->n_bytes);  // checked reads: a truncated file is an error
    if (!head_order.empty() && permute.at(p)) permute_head_rows(staging, static_cast<size_t>(w.row_bytes), head_order);
    cl::to_device_layout(w.type, staging.data(), t->rows(), static_cast<size_t>(w.row_bytes));
    ctx.write(w.buf, staging.data(), t->n_bytes, offset);
    offset += t->n_bytes;
  }
  return w;
}

ops::DeviceWeight upload_matrix(cl::Context& ctx, const gguf::GgufFile& file, WeightPlace place,
                                const gguf::TensorInfo& t) {
  return upload_rows(ctx, file, place, {&t}, t.name);
}

bool fusable(const std::vector<const gguf::TensorInfo*>& parts) {
  for (const auto* t : parts)
    if (t->type != parts[0]->type || t->shape.at(0) != parts[0]->shape.at(0)) return false;
  return true;
}

// A small tensor's values as floats (norms may be F16 in some files).
std::vector<float> read_f32(const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  const int64_t n = t.n_elements();
  std::vector<float> host(static_cast<size_t>(n));
  std::vector<uint8_t> raw(t.n_bytes);
  file.read_tensor(t, raw.data(), 0, t.n_bytes);
  quant::dequantize_row(t.type, raw.data(), host.data(), n);
  return host;
}

// `v` with the entries of each head (order.size() of them) reordered as the weights' rows are.
std::vector<float> permute_heads(const std::vector<float>& v, const std::vector<int>& order) {
  if (order.empty()) return v;
  std::vector<float> out(v.size());
  const size_t hd = order.size();
  for (size_t i = 0; i < v.size(); ++i) out[i] = v[i / hd * hd + static_cast<size_t>(order.at(i % hd))];
  return out;
}

cl::Buffer upload_floats(cl::Context& ctx, const std::vector<float>& host, const std::string& label) {
  cl::Buffer b = ctx.memory().alloc(cl::MemCategory::Weights, host.size() * sizeof(float), label);
  ctx.write(b, host.data(), host.size() * sizeof(float));
  return b;
}

cl::Buffer upload_f32(cl::Context& ctx, const gguf::GgufFile& file, const gguf::TensorInfo& t,
                      const std::vector<int>& order = {}) {
  return upload_floats(ctx, permute_heads(read_f32(file, t), order), t.name);
}

// The q | k | v biases as one float vector beside the q|k|v product's columns; q and k are
// reordered within each head as their weights' rows are (`order`, for NEOX models).
cl::Buffer upload_qkv_bias(cl::Context& ctx, const gguf::GgufFile& file, const LayerWeights& l,
                           const std::vector<int>& order) {
  std::vector<float> host = permute_heads(read_f32(file, *l.bq), order);
  const std::vector<float> k = permute_heads(read_f32(file, *l.bk), order), v = read_f32(file, *l.bv);
  host.insert(host.end(), k.begin(), k.end());
  host.insert(host.end(), v.begin(), v.end());
  return upload_floats(ctx, host, l.bq->name);
}

uint64_t f32_bytes(const gguf::TensorInfo& t) { return static_cast<uint64_t>(t.n_elements()) * 4; }

}  // namespace

uint64_t device_weight_bytes(const gguf::GgufFile&, const WeightTable& table) {
  uint64_t total = table.token_embd->n_bytes + f32_bytes(*table.output_norm);
  if (table.output != table.token_embd) total += table.output->n_bytes;
  for (const auto& l : table.layers)
    total += f32_bytes(*l.attn_norm) + f32_bytes(*l.ffn_norm) + l.wq->n_bytes + l.wk->n_bytes + l.wv->n_bytes +
             l.wo->n_bytes + l.w_gate->n_bytes + l.w_up->n_bytes + l.w_down->n_bytes;
  for (const auto& l : table.layers)
    for (const gguf::TensorInfo* t : {l.q_norm, l.k_norm, l.post_attn_norm, l.post_ffn_norm, l.bq, l.bk, l.bv})
      if (t != nullptr) total += f32_bytes(*t);
  return total;
}

WeightPlace default_weight_place(const cl::Context& ctx) {
  return ctx.device().host_unified ? WeightPlace::InPlace : WeightPlace::Copied;
}

DeviceModel upload_model(cl::Context& ctx, const gguf::GgufFile& file, const LlamaConfig& cfg,
                         const WeightTable& table, WeightPlace place) {
  DeviceModel m;
  m.cfg = cfg;
  m.place = place;
  m.token_embd = upload_matrix(ctx, file, place, *table.token_embd);
  m.output_norm = upload_f32(ctx, file, *table.output_norm);
  m.output_tied = table.output == table.token_embd;
  if (!m.output_tied) m.output = upload_matrix(ctx, file, place, *table.output);
  const std::vector<int> order = cfg.rope_neox ? neox_to_adjacent(cfg.head_dim, cfg.n_rot) : std::vector<int>{};
  for (const auto& l : table.layers) {
    DeviceLayer d;
    d.attn_norm = upload_f32(ctx, file, *l.attn_norm);
    const std::string blk = "blk." + std::to_string(m.layers.size());
    if (fusable({l.wq, l.wk, l.wv})) {
      d.wqkv = upload_rows(ctx, file, place, {l.wq, l.wk, l.wv}, blk + ".attn_qkv", order, {true, true, false});
    } else {
      d.wq = upload_rows(ctx, file, place, {l.wq}, l.wq->name, order, {true});
      d.wk = upload_rows(ctx, file, place, {l.wk}, l.wk->name, order, {true});
      d.wv = upload_matrix(ctx, file, place, *l.wv);
    }
    if (l.bq) d.qkv_bias = upload_qkv_bias(ctx, file, l, order);
    if (l.q_norm) d.q_norm = upload_f32(ctx, file, *l.q_norm, order);
    if (l.k_norm) d.k_norm = upload_f32(ctx, file, *l.k_norm, order);
    if (l.post_attn_norm) d.post_attn_norm = upload_f32(ctx, file, *l.post_attn_norm);
    if (l.post_ffn_norm) d.post_ffn_norm = upload_f32(ctx, file, *l.post_ffn_norm);
    d.wo = upload_matrix(ctx, file, place, *l.wo);
    d.ffn_norm = upload_f32(ctx, file, *l.ffn_norm);
    if (fusable({l.w_gate, l.w_up})) {
      d.w_gate_up = upload_rows(ctx, file, place, {l.w_gate, l.w_up}, blk + ".ffn_gate_up");
    } else {
      d.w_gate = upload_matrix(ctx, file, place, *l.w_gate);
      d.w_up = upload_matrix(ctx, file, place, *l.w_up);
    }
    d.w_down = upload_matrix(ctx, file, place, *l.w_down);
    m.layers.push_back(std::move(d));
  }
  if (place == WeightPlace::InPlace) file.drop_cached_data();
  return m;
}

}  // namespace infinipot
