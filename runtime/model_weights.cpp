#include "runtime/model_weights.h"

#include <vector>

#include "model_loader/quant.h"
#include "runtime/cl_error.h"

namespace infinipot {
namespace {

ops::DeviceWeight upload_matrix(cl::Context& ctx, const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  ops::DeviceWeight w;
  w.type = t.type;
  w.cols = static_cast<int>(t.shape.at(0));
  w.rows = static_cast<int>(t.rows());
  w.row_bytes = static_cast<int>(quant::row_bytes(t.type, w.cols));
  if (w.cols % 8 != 0)
    throw cl::ClError("tensor '" + t.name + "': row length " + std::to_string(w.cols) +
                      " is not a multiple of 8, which the device kernels need");
  w.buf = ctx.memory().alloc(cl::MemCategory::Weights, t.n_bytes, t.name);
  ctx.write(w.buf, file.tensor_data(t), t.n_bytes);
  return w;
}

cl::Buffer upload_f32(cl::Context& ctx, const gguf::GgufFile& file, const gguf::TensorInfo& t) {
  const int64_t n = t.n_elements();
  std::vector<float> host(static_cast<size_t>(n));
  quant::dequantize_row(t.type, file.tensor_data(t), host.data(), n);  // norms may be F16 in some files
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
    d.wq = upload_matrix(ctx, file, *l.wq);
    d.wk = upload_matrix(ctx, file, *l.wk);
    d.wv = upload_matrix(ctx, file, *l.wv);
    d.wo = upload_matrix(ctx, file, *l.wo);
    d.ffn_norm = upload_f32(ctx, file, *l.ffn_norm);
    d.w_gate = upload_matrix(ctx, file, *l.w_gate);
    d.w_up = upload_matrix(ctx, file, *l.w_up);
    d.w_down = upload_matrix(ctx, file, *l.w_down);
    m.layers.push_back(std::move(d));
  }
  return m;
}

}  // namespace infinipot
