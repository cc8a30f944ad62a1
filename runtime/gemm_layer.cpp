#include "runtime/gemm_layer.h"

#include <clblast.h>

#include "runtime/cl_error.h"
#include "runtime/ops/dequant.h"
#include "runtime/ops/gemm.h"
#include "runtime/ops/gemm_native.h"

namespace infinipot {
namespace {

void apply_clblast_overrides(cl::Context& ctx) {
  // platforms/tuning.json: "clblast": {"Xgemm": {"MWG": 64, ...}, ...} for this device.
  for (auto it = ctx.tuning().clblast.begin(); it != ctx.tuning().clblast.end(); ++it) {
    std::unordered_map<std::string, size_t> params;
    for (auto p = it.value().begin(); p != it.value().end(); ++p) params[p.key()] = p.value().get<size_t>();
    auto status = clblast::OverrideParameters(ctx.device().id, it.key(), clblast::Precision::kSingle, params);
    if (status != clblast::StatusCode::kSuccess)
      throw cl::ClError("clblast::OverrideParameters(" + it.key() + ") from platforms/tuning.json failed with status " +
                        std::to_string(static_cast<int>(status)));
  }
}

}  // namespace

cl::MemoryPlan GemmLayer::plan(const cl::Tuning& tuning, int max_rows, int max_k, size_t max_weight_floats) {
  cl::MemoryPlan p;
  const bool packed = tuning.gemm_backend == "packed";
  p[cl::MemCategory::Gemm] =
      max_weight_floats * 4 + (packed ? ops::packed_a_floats(max_rows, max_k, tuning.gemm_tile_rows) * 4 : 0) +
      (packed && !tuning.gemm_native_types.empty() ? ops::gemm_native_input_bytes(max_rows, max_k) : 0);
  return p;
}

GemmLayer::GemmLayer(cl::Context& ctx, const std::string& backend, int max_rows, int max_k, size_t max_weight_floats)
    : ctx_(ctx), backend_(backend) {
  if (backend != "packed" && backend != "clblast")
    throw cl::ClError("unknown GEMM backend '" + backend + "' (expected packed or clblast)");
  if (backend == "packed") {
    packed_a_ = ctx.memory().alloc(
        cl::MemCategory::Gemm, ops::packed_a_floats(max_rows, max_k, ctx.tuning().gemm_tile_rows) * 4, "gemm.packed_a");
    if (!ctx.tuning().gemm_native_types.empty() && max_k >= 32)
      input_native_ = ctx.memory().alloc(cl::MemCategory::Gemm, ops::gemm_native_input_bytes(max_rows, max_k), "gemm.input_native");
  } else
    apply_clblast_overrides(ctx);
  weights_ = ctx.memory().alloc(cl::MemCategory::Gemm, max_weight_floats * 4, "gemm.weights_f32");
}

GemmLayer::GemmLayer(GemmLayer&& o) noexcept
    : ctx_(o.ctx_), backend_(std::move(o.backend_)), input_(o.input_), in_rows_(o.in_rows_), in_k_(o.in_k_),
      packed_a_(std::move(o.packed_a_)), input_native_(std::move(o.input_native_)), packed_ready_(o.packed_ready_),
      quantized_ready_(o.quantized_ready_), weights_(std::move(o.weights_)), temp_(std::move(o.temp_)),
      used_clblast_(o.used_clblast_) {
  o.used_clblast_ = false;
}

GemmLayer::~GemmLayer() {
  // Other contexts' CLBlast programs go too; they are rebuilt (from CLBlast's binary cache
  // being gone as well, i.e. compiled again) on their next product.
  if (used_clblast_) clblast::ClearCache();
}

void GemmLayer::set_input(const cl::Buffer& in, int n, int k) {
  input_ = &in;
  in_rows_ = n;
  in_k_ = k;
  packed_ready_ = quantized_ready_ = false;
}

void GemmLayer::ensure_packed() {
  if (backend_ == "packed" && !packed_ready_) ops::pack_a(ctx_, *input_, in_rows_, in_k_, in_k_, packed_a_);
  packed_ready_ = true;
}

void GemmLayer::ensure_quantized() {
  if (!quantized_ready_) ops::gemm_native_quantize(ctx_, *input_, in_rows_, in_k_, in_k_, input_native_);
  quantized_ready_ = true;
}

bool GemmLayer::native(const ops::DeviceWeight& W) {
  return backend_ == "packed" && input_native_.bytes() > 0 && ops::gemm_native_fits(ctx_, W);
}

void GemmLayer::multiply(const ops::DeviceWeight& W, cl::Buffer& out, int ldo, int col, bool accumulate) {
  if (!input_ || W.cols != in_k_) throw cl::ClError("GemmLayer::multiply: input width does not match the weight");
  if (native(W)) {
    ensure_quantized();
    return ops::gemm_native(ctx_, in_rows_, W, 0, W.rows, input_native_, weights_, out, ldo, accumulate, col);
  }
  ensure_packed();
  if (backend_ == "packed" && ops::gemm_dequant_fits(ctx_, W)) {
    ops::gemm_dequant(ctx_, in_rows_, W, 0, W.rows, packed_a_, weights_, out, ldo, accumulate, col);
  } else if (backend_ == "packed") {
    ops::dequant_to_panels(ctx_, W, weights_);
    ops::gemm_packed(ctx_, in_rows_, W.rows, W.cols, packed_a_, weights_, out, ldo, accumulate, col);
  } else {
    ops::dequant_rows(ctx_, W, weights_);
    run_clblast(in_rows_, W.rows, W.cols, out, ldo, col, accumulate);
  }
}

void GemmLayer::multiply_rows(const ops::DeviceWeight& W, int row0, int n_rows, cl::Buffer& out, bool accumulate) {
  if (!input_ || W.cols != in_k_) throw cl::ClError("GemmLayer::multiply_rows: input width does not match the weight");
  if (native(W)) {
    ensure_quantized();
    return ops::gemm_native(ctx_, in_rows_, W, row0, n_rows, input_native_, weights_, out, n_rows, accumulate, 0);
  }
  ensure_packed();
  if (backend_ == "packed" && ops::gemm_dequant_fits(ctx_, W)) {
    ops::gemm_dequant(ctx_, in_rows_, W, row0, n_rows, packed_a_, weights_, out, n_rows, accumulate, 0);
  } else if (backend_ == "packed") {
    ops::dequant_rows_to_panels(ctx_, W, row0, n_rows, weights_);
    ops::gemm_packed(ctx_, in_rows_, n_rows, W.cols, packed_a_, weights_, out, n_rows, accumulate, 0);
  } else {
    ops::dequant_row_range(ctx_, W, row0, n_rows, weights_);
    run_clblast(in_rows_, n_rows, W.cols, out, n_rows, 0, accumulate);
  }
}

void GemmLayer::run_clblast(int m, int n, int k, cl::Buffer& out, int ldo, int col, bool accumulate) {
  using clblast::Layout;
  using clblast::Transpose;
  used_clblast_ = true;
  size_t temp_bytes = 0;
  cl_command_queue q = ctx_.queue();
  auto status = clblast::GemmTempBufferSize<float>(Layout::kRowMajor, Transpose::kNo, Transpose::kYes, m, n, k, 0, k,
                                                   0, k, col, ldo, &q, temp_bytes);
  if (status != clblast::StatusCode::kSuccess)
    throw cl::ClError("clblast::GemmTempBufferSize failed with status " + std::to_string(static_cast<int>(status)));
  if (temp_bytes > temp_.bytes()) {
    temp_ = cl::Buffer();
    temp_ = ctx_.memory().alloc(cl::MemCategory::Gemm, temp_bytes, "gemm.clblast_temp");
  }
  status = clblast::Gemm<float>(Layout::kRowMajor, Transpose::kNo, Transpose::kYes, m, n, k, 1.0f, input_->get(), 0, k,
                                weights_.get(), 0, k, accumulate ? 1.0f : 0.0f, out.get(), col, ldo, &q, nullptr,
                                temp_bytes ? temp_.get() : nullptr);
  if (status != clblast::StatusCode::kSuccess)
    throw cl::ClError("clblast::Gemm (" + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                      ") failed with status " + std::to_string(static_cast<int>(status)));
}

}  // namespace infinipot
