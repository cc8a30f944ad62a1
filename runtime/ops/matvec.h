// Launchers of cl_kernels/matvec.cl: the decode products of GGUF-encoded weights, with their
// fusions (the norm inside, the GLU, RoPE + the KV store) and, where the CPU has one, its own
// 8-bit dot (native_dot.cl); reference ref::matvec (the fusions: a double reference in the
// test), tests tests/runtime/test_matvec.cpp and, for the native dot,
// tests/runtime/test_native_dot.cpp.
#pragma once
#include <cstddef>

#include "runtime/ops/device_weight.h"

namespace infinipot::ops {

// matvec.cl: y[r][o] (+)= W[o] . x[r] for r < n_rows (<= 4)   x: [n_rows][W.cols]  y: [n_rows][ldy]
void matvec(Context& c, const DeviceWeight& W, const Buffer& x, int n_rows, Buffer& y, int ldy, bool accumulate,
            size_t y_offset = 0);

// matvec.cl decode fusions (float products, 1..4 rows; layout in the .cl header):
//   matvec_norm: y[r][o] = W[o] . (rmsnorm(x[r]) * norm.w)   (the norm computed in the kernel;
//                no normed copy of x written)                 y: [n_rows][ldy] from y_offset
//   matvec_glu:  out[r][o] = act(gate[o] . x'[r]) * (up[up_row0 + o] . x'[r]) for o < n_ff, with
//                x' = x, or rmsnorm(x) * norm.w when norm.w is set   out: [n_rows][n_ff]
//                (fused gate|up: gate = up = that matrix, up_row0 = n_ff; separate: up_row0 = 0)
struct RowNorm {
  const Buffer* w = nullptr;  // [K] float; null: no norm
  float eps = 0.f;
};
enum class Glu { Silu, GeluTanh };
void matvec_norm(Context& c, const DeviceWeight& W, const Buffer& x, const RowNorm& norm, int n_rows, Buffer& y,
                 int ldy, size_t y_offset = 0);
void matvec_glu(Context& c, const DeviceWeight& gate, const DeviceWeight& up, int up_row0, int n_ff, Glu act,
                const Buffer& x, const RowNorm& norm, int n_rows, Buffer& out);

// matvec.cl: the fused q|k|v product (W: [(n_head + 2 n_kv_heads) head_dim][K], out qkv:
// [n_rows][W.rows]) with rope_store_kv's work in its epilogue: the q and k heads come out
// rotated and k, v also land in the KV store at slots slot0 .. slot0 + n_rows (one launch
// instead of two). Same fields as rope_store_kv; head_dim % 4 == 0; no QK-norm in between.
struct RopeKv {
  int n_head, n_kv_heads, head_dim, n_rot;
  const Buffer* cs;  // [n_rows][n_rot/2] (cos, sin), from rope_angles
  Buffer* k_cache;   // [n_kv_heads][cap][head_dim]
  Buffer* v_cache;
  int cap, slot0;
  bool kv_half = false;
  const Buffer* bias = nullptr;  // [rows of W] float, added before RoPE (Qwen2's q|k|v biases); null: none
};
void matvec_qkv_rope(Context& c, const DeviceWeight& W, const Buffer& x, const RowNorm& norm, int n_rows,
                     Buffer& qkv, const RopeKv& kv);

// Whether the matvec.cl products of W (every variant above) run in the CPU's own 8-bit dot
// instruction (native_dot.cl): the device has one, the tuning's matvec_native_dot lists it, W
// is Q4_0, Q4_1 or Q8_0 and matvec_native_types lists its type, K is a multiple of 32, and the
// device takes work-groups of matvec_native_local items. Then the input row is quantized to 8
// bits per 32-block once per work-group (as quantize_q8 does), and a norm inside costs about
// nothing (each block's sum of squares comes with its quantization).
bool matvec_native(const Context& c, const DeviceWeight& W);

}  // namespace infinipot::ops
