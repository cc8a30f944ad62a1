#include "runtime/model_weights.h"

#include <vector>

#include "model_loader/quant.h"
#include "runtime/cl_error.h"

namespace infinipot {
namespace {

// Uploads the row-wise concatenation of tensors sharing type and row length.
ops::DeviceWeight upload_rows(cl::Context& ctx, const gguf::GgufFile& file,
                              const std::vector<const gguf::TensorInfo*>& parts, const std::string& label) {
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
  w.buf = ctx.memory().alloc(cl::MemCategory::Weights, bytes, label);
  uint64_t offset = 0;
  std::vector<uint8_t> staging;
  for (const auto* t : parts) {
    staging.resize(t->n_bytes);
    file.read_tensor(*t, staging.data(), 0, t->n_bytes);  // checked reads: a truncated file is an error
    ctx.write(w.buf, staging.data(), t->n_bytes, offset);
    offset += t->n_bytes;
  }
  return w;
}

ops::DeviceWeight upload_matrix(cl::Context& ctx, const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  return upload_rows(ctx, file, {&t}, t.name);
}

bool fusable(const std::vector<const gguf::TensorInfo*>& parts) {
  for (const auto* t : parts)
    if (t->type != parts[0]->type || t->shape.at(0) != parts[0]->shape.at(0)) return false;
  return true;
}

cl::Buffer upload_f32(cl::Context& ctx, const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  const int64_t n = t.n_elements();
  std::vector<float> host(static_cast<size_t>(n));
  std::vector<uint8_t> raw(t.n_bytes);
  file.read_tensor(t, raw.data(), 0, t.n_bytes);
  quant::dequantize_row(t.type, raw.data(), host.data(), n);  // norms may be F16 in some files
  cl::Buffer b = ctx.memory().alloc(cl::MemCategory::Weights, host.size() * sizeof(float), t.name);
  ctx.write(b, host.data(), host.size() * sizeof(float));
  return b;
}

uint64_t f32_bytes(const gguf::TensorInfo& t) { return static_cast<uint64_t>(t.n_elements()) * 4; }

}  // namespace

uint64_t device_weight_bytes(const gguf::GgufFile&, const WeightTable& table) {
  uint64_t total = table.token_embd->n_bytes + f32_bytes(*table.output_norm);
  if (table.output != table.token_embd) total += table.output->n_bytes;
  for (const auto& l : table.layers)
    total += f32_bytes(*l.attn_norm) + f32_bytes(*l.ffn_norm) + l.wq->n_bytes + l.wk->n_bytes + l.wv->n_bytes +
             l.wo->n_bytes + l.w_gate->n_bytes + l.w_up->n_bytes + l.w_down->n_bytes;
  return total;
}

DeviceModel upload_model(cl::Context& ctx, const gguf::GgufFile& file, const LlamaConfig& cfg,
                         const WeightTable& table) {
  DeviceModel m;
  m.cfg = cfg;
  m.token_embd = upload_matrix(ctx, file, *table.token_embd);
  m.output_norm = upload_f32(ctx, file, *table.output_norm);
  m.output_tied = table.output == table.token_embd;
  if (!m.output_tied) m.output = upload_matrix(ctx, file, *table.output);
  for (const auto& l : table.layers) {
    DeviceLayer d;
    d.attn_norm = upload_f32(ctx, file, *l.attn_norm);
    const std::string blk = "blk." + std::to_string(m.layers.size());
    if (fusable({l.wq, l.wk, l.wv})) {
      d.wqkv = upload_rows(ctx, file, {l.wq, l.wk, l.wv}, blk + ".attn_qkv");
    } else {
      d.wq = upload_matrix(ctx, file, *l.wq);
      d.wk = upload_matrix(ctx, file, *l.wk);
      d.wv = upload_matrix(ctx, file, *l.wv);
    }
    d.wo = upload_matrix(ctx, file, *l.wo);
    d.ffn_norm = upload_f32(ctx, file, *l.ffn_norm);
    if (fusable({l.w_gate, l.w_up})) {
      d.w_gate_up = upload_rows(ctx, file, {l.w_gate, l.w_up}, blk + ".ffn_gate_up");
    } else {
      d.w_gate = upload_matrix(ctx, file, *l.w_gate);
      d.w_up = upload_matrix(ctx, file, *l.w_up);
    }
    d.w_down = upload_matrix(ctx, file, *l.w_down);
    m.layers.push_back(std::move(d));
  }
  return m;
}

}  // namespace infinipot
