// The one GEMM layer prefill goes through: out[:, col ..] (+)= in[n][K] · W^T for a weight
// matrix in its GGUF encoding. Two backends, chosen per platform in platforms/tuning.json
// by measured speed (bench/bench_infinipot --gemm prints both):
//   packed : dequantize W into 16-wide panels, pack `in` into 8-row panels, gemm.cl; or, for
//            the weight types the tuning's gemm_native_types lists on a CPU with AVX-512 VNNI,
//            quantize `in` to 16 bits per 32-block and multiply in vpdpwssd (gemm_native.cl)
//   clblast: dequantize W row-major, CLBlast SGEMM (per-device parameters from
//            platforms/ applied with clblast::OverrideParameters); its temporary buffer comes
//            from our allocator, so the budget stays exact.
#pragma once
#include <string>
#include "runtime/context.h"
#include "runtime/ops/device_weight.h"

namespace infinipot {

class GemmLayer {
 public:
  // max_rows: most input rows; max_k: widest input; max_panel_floats: largest dequantized W.
  GemmLayer(cl::Context& ctx, const std::string& backend, int max_rows, int max_k, size_t max_weight_floats);
  GemmLayer(GemmLayer&& other) noexcept;
  // A CLBlast layer clears CLBlast's process-wide caches: a cached program holds its OpenCL
  // context, so without this every engine's context (and the driver's memory for it) outlived
  // the engine.
  ~GemmLayer();
  // tuning: its gemm_backend and gemm_tile_rows (the packed input's panels) size the buffers.
  static cl::MemoryPlan plan(const cl::Tuning& tuning, int max_rows, int max_k, size_t max_weight_floats);

  const std::string& backend() const { return backend_; }
  // Takes an input for the products that follow; each form of it (packed floats, 16-bit
  // blocks) is made once, by the first product that reads it.
  void set_input(const cl::Buffer& in, int n, int k);
  // out[r][col + o] (+)= sum_k in[r][k] W[o][k] for the input given to set_input.
  void multiply(const ops::DeviceWeight& W, cl::Buffer& out, int ldo, int col, bool accumulate);
  // Same for rows [row0, row0 + n_rows) of W only (LM-head tiles); out has ldo = n_rows.
  void multiply_rows(const ops::DeviceWeight& W, int row0, int n_rows, cl::Buffer& out, bool accumulate);

 private:
  void run_clblast(int m, int n, int k, cl::Buffer& out, int ldo, int col, bool accumulate);
  void ensure_packed();
  void ensure_quantized();
  // Whether W's product runs in gemm_native (the packed backend, gemm_native_fits, the buffer made).
  bool native(const ops::DeviceWeight& W);

  cl::Context& ctx_;
  std::string backend_;
  const cl::Buffer* input_ = nullptr;
  int in_rows_ = 0, in_k_ = 0;
  cl::Buffer packed_a_;  // packed: [pad8(max_rows)][max_k]
  cl::Buffer input_native_;  // packed with gemm_native_types: ops::gemm_native_input_bytes(max_rows, max_k)
  bool packed_ready_ = false, quantized_ready_ = false;  // the forms of the current input made
  cl::Buffer weights_;   // packed: [pad16(rows)][K] panels (gemm_native: its panel records); clblast: [rows][K]
  cl::Buffer temp_;      // clblast's temporary buffer (grown on demand, through the allocator)
  bool used_clblast_ = false;  // a CLBlast product ran (its programs are cached)
};

}  // namespace infinipot
