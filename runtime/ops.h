// Host launchers, one per kernel family in cl_kernels/. Each validates its arguments,
// picks the compiled variant (-D options) and the NDRange; the forward pass calls only these.
// Activations are row-major float: "[n][k]" means n rows of k floats.
#pragma once
#include <string>
#include <vector>
#include "model_loader/gguf.h"
#include "runtime/context.h"

namespace infinipot::ops {

using cl::Buffer;
using cl::Context;

// A weight matrix on the device, in its GGUF encoding: [rows][row_bytes] ggml blocks.
struct DeviceWeight {
  Buffer buf;
  gguf::TensorType type = gguf::TensorType::F32;
  int rows = 0;          // output features (ggml ne1)
  int cols = 0;          // input features (ggml ne0, contiguous)
  int row_bytes = 0;
};

// embedding.cl: out[t][:] = dequant(table[ids[t]])          out: [n][table.cols]
void embed(Context& c, const DeviceWeight& table, const Buffer& ids, int n, Buffer& out);

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

// matvec_q8.cl: decode products in integers. quantize_q8 writes each 32-element block of x's
// rows as a 40-byte Q8 block (float d, float s, char q[32]; layout in the .cl header); matvec_q8
// then computes y[r][o] (+)= W[o] . xq[r] for Q4_0, Q4_1 and Q8_0 weights (matvec_q8_supports).
constexpr int kQ8BlockBytes = 40;
size_t q8_bytes(int n_rows, int k);  // bytes quantize_q8 writes for [n_rows][k]
bool matvec_q8_supports(gguf::TensorType t);
void quantize_q8(Context& c, const Buffer& x, int n_rows, int k, Buffer& xq);  // x: [n_rows][k], k % 32 == 0
void matvec_q8(Context& c, const DeviceWeight& W, const Buffer& xq, int n_rows, Buffer& y, int ldy, bool accumulate,
               size_t y_offset = 0);

// dequant.cl: Bp = panels of W (see gemm.cl)                 Bp: [pad16(W.rows)][W.cols]
void dequant_to_panels(Context& c, const DeviceWeight& W, Buffer& Bp, size_t bp_offset_floats = 0);
// dequant.cl: panels of rows [row0, row0 + n_rows) of W only    Bp: [pad16(n_rows)][W.cols]
void dequant_rows_to_panels(Context& c, const DeviceWeight& W, int row0, int n_rows, Buffer& Bp);
// dequant.cl: out = W as row-major floats                    out: [W.rows][W.cols]
void dequant_rows(Context& c, const DeviceWeight& W, Buffer& out);
// dequant.cl: rows [row0, row0 + n_rows) of W as row-major floats   out: [n_rows][W.cols]
void dequant_row_range(Context& c, const DeviceWeight& W, int row0, int n_rows, Buffer& out);
size_t panel_floats(int rows, int cols);  // floats dequant_to_panels writes
// Rows per panel of pack_a for a gemm_packed tile height (c.tuning().gemm_tile_rows): 6-row
// tiles read 6-row panels, 4- and 8-row tiles 8-row panels. Throws for another height.
int a_panel_rows(int tile_rows);
size_t packed_a_floats(int m, int k, int tile_rows);  // floats pack_a writes

// -DWTYPE=<ggml id> for the kernels that read weights (quant_formats.cl); throws, naming the
// supported types, for a type without a device kernel.
std::string wtype_option(gguf::TensorType t);

// gemm.cl: Ap = pack(X), panels of a_panel_rows(tuning's tile) rows   X: [m][ldx], Ap: [pad(m)][k]
void pack_a(Context& c, const Buffer& X, int m, int k, int ldx, Buffer& Ap);
// gemm.cl: C[m][n] (+)= A[m][k] B[n][k]^T from packed operands; C from element c_offset,
// leading dimension ldc
void gemm_packed(Context& c, int m, int n, int k, const Buffer& Ap, const Buffer& Bp, Buffer& C, int ldc,
                 bool accumulate, size_t c_offset = 0);
// gemm.cl: the same product with rows [row0, row0 + n) of the quantized W as B, each 16-row
// panel dequantized into Bp (pad16(n) x k floats, scratch) by the work-group that multiplies it.
// gemm_dequant_fits: whether the device runs its work-groups (16 items) for this weight.
bool gemm_dequant_fits(Context& c, const DeviceWeight& W);
void gemm_dequant(Context& c, int m, const DeviceWeight& W, int row0, int n, const Buffer& Ap, Buffer& Bp, Buffer& C,
                  int ldc, bool accumulate, size_t c_offset = 0);
// gemm_native.cl: prefill products in the CPU's own integer dot (vpdpwssd, 16-bit inputs).
// gemm_native_fits: whether W's products take it: the device's native dot is AVX-512 VNNI (a
// PoCL device on such a CPU) and the tuning's matvec_native_dot lists it, gemm_native_types
// lists W's type, K is a multiple of 32 and the device runs its 16-item work-groups. The input
// is quantized once (gemm_native_quantize, 16 bits per 32-block, into gemm_native_input_bytes)
// for every product that reads it; gemm_native then rewrites each 16-row panel of rows [row0,
// row0 + n) of W into Bp (gemm_native_panel_bytes, scratch) and multiplies.
bool gemm_native_fits(Context& c, const DeviceWeight& W);
size_t gemm_native_input_bytes(int m, int k);
size_t gemm_native_panel_bytes(int n, int k);
void gemm_native_quantize(Context& c, const Buffer& X, int m, int k, int ldx, Buffer& xq);
void gemm_native(Context& c, int m, const DeviceWeight& W, int row0, int n, const Buffer& xq, Buffer& Bp, Buffer& C,
                 int ldc, bool accumulate, size_t c_offset = 0);

// norm.cl: out[r] = rmsnorm(x[r]) * w                        x, out: [n_rows][n]
void rms_norm(Context& c, const Buffer& x, const Buffer& w, Buffer& out, int n_rows, int n, float eps);
// norm.cl: out[r] += rmsnorm(x[r]) * w (post-norm + residual)  x, out: [n_rows][n], not aliased
void rms_norm_add(Context& c, const Buffer& x, const Buffer& w, Buffer& out, int n_rows, int n, float eps);
// norm.cl: in place, each of n_heads heads of head_dim floats at x[t][off + h*head_dim]
// (QK-norm on fused q|k|v rows)                              x: [n_tokens][ld], w: [head_dim]
void rms_norm_heads(Context& c, Buffer& x, int ld, int off, int n_heads, int head_dim, int n_tokens, const Buffer& w,
                    float eps);

// rope.cl: rotate the q and k heads of fused q|k|v rows and store k, v at slot0..  (one launch)
//   cs: [n_tokens][n_rot/2] (cos, sin) floats, from rope_angles
void rope_store_kv(Context& c, Buffer& qkv, int ld, int n_head, int n_kv_heads, int head_dim, int n_rot,
                   const Buffer& cs, Buffer& k_cache, Buffer& v_cache, int cap, int slot0, int n_tokens,
                   bool kv_half = false);
// Host side: the (cos, sin) table for positions pos[0..n) as rope_store_kv reads it; pair i's
// angle divided by freq_factors[i] when given ([n_rot/2], Llama 3's rope_freqs).
std::vector<float> rope_angles(const std::vector<int>& pos, int n_rot, float theta,
                               const std::vector<float>& freq_factors = {});
// The same table for the n positions first, first+1, .. into cs (resized; no allocation once
// it has held a table as large): what a decode step fills each token.
void rope_angles(int first, int n, int n_rot, float theta, const std::vector<float>& freq_factors,
                 std::vector<float>& cs);
// rope.cl: re-rotate cached keys by delta[h][slot], in two steps so that layers sharing one
// delta list compute its angles once: rope_shift_angles fills the (cos, sin) table from delta,
// rope_shift applies it to one layer.   k_cache: [n_heads][cap][head_dim]   delta: [n_heads][cap]
//                                       table: [n_heads][cap][n_rot/2] float2 (rope_shift_table_bytes)
//                                       freq_factors: [n_rot/2] float, each pair's angle divisor (1: none)
size_t rope_shift_table_bytes(int n_heads, int cap, int n_rot);
void rope_shift_angles(Context& c, const Buffer& delta, int n_heads, int cap, int n_rot, int n_slots, float theta,
                       const Buffer& freq_factors, Buffer& table);
void rope_shift(Context& c, Buffer& k_cache, int n_heads, int cap, int head_dim, int n_rot, const Buffer& delta,
                int n_slots, const Buffer& table, bool kv_half = false);

// elementwise.cl
void swiglu(Context& c, const Buffer& gu, int n_rows, int n_ff, Buffer& act);  // gu: [n][2*n_ff]
void geglu_tanh(Context& c, const Buffer& gu, int n_rows, int n_ff, Buffer& act);  // gu: [n][2*n_ff]
void scale(Context& c, Buffer& x, size_t n, float s);  // x[i] *= s, i < n

// kv_cache.cl: dst[h][j] = src[h][keep[h][j]] for j < n_keep   caches: [n_kv_heads][cap][head_dim]
void kv_gather(Context& c, const Buffer& src, Buffer& dst, int n_kv_heads, int cap, int head_dim,
               const Buffer& keep, int n_keep, bool kv_half = false);

// kv_half: the KV store holds 16-bit floats (kv_format.cl); every kernel touching it takes this.
struct AttentionShape {
  int n_heads, n_kv_heads, head_dim, cap;
  bool kv_half = false;
  float scale = 0.f;  // scores = q.k * scale; 0: 1/sqrt(head_dim)
  int window = 0;     // sliding window: row at slot p sees slots (p - window, p]; 0: all of them
};
// A decode row's attention on a CPU device in `splits` work-items per KV head (attention.cl
// attention_decode_lanes_group; at most one per 16-key block), with their scratch: partial
// softmaxes, and per KV head a count of the items done, zero between launches (fill_zero it
// once after allocating). decode_splits: twice the device's compute units over the KV heads.
struct DecodeSplit {
  int splits = 1;
  Buffer* part = nullptr;   // [n_heads][splits][head_dim + 2] floats
  Buffer* count = nullptr;  // [n_kv_heads] ints
};
int decode_splits(const Context& c, const AttentionShape& s);
// Items per KV head a decode row at slot n_past runs in: split.splits, at most one per 16-key
// block of its window; throws where split lacks the scratch for more than one.
int decode_split_ways(const AttentionShape& s, int n_past, const DecodeSplit& split);
// The attention kernels' score scale (s.scale, or 1 / sqrt(head_dim)) and window argument
// (s.window, or past the capacity for global layers: nothing cut).
float score_scale(const AttentionShape& s);
int window_arg(const AttentionShape& s);
// Bytes of part for `splits` items per KV head, and of count.
size_t decode_split_part_bytes(const AttentionShape& s, int splits);
size_t decode_split_count_bytes(const AttentionShape& s);
// attention.cl: out = softmax(q k^T * scale, causal) v; lse per (row, head). split: room for a
// decode row's attention to run several items per KV head (else one).
void attention(Context& c, const AttentionShape& s, const Buffer& q, int ldq, const Buffer& k_cache,
               const Buffer& v_cache, int n_past, int n, Buffer& out, int ldo, Buffer& lse,
               const DecodeSplit& split = {});
// decode_layer.cl: a decode row's transformer block in one launch (x += Wo . attention(...),
// then x += Wd . GLU(...); Forward::layer's five steps, the same arithmetic as their launches
// in the native dot and attention_decode_lanes_group). sync: 11 ints, zero before the first
// launch (each launch leaves them zero). Call only where decode_layer_supported.
struct DecodeLayer {
  const DeviceWeight* wqkv;              // [(n_head + 2 n_kv) head_dim][n_embd]
  const DeviceWeight* wo;                // [n_embd][n_head head_dim]
  const DeviceWeight* gate;              // rows [0, n_ff) are gate rows
  const DeviceWeight* up;                // rows [up_row0, up_row0 + n_ff) are up rows
  int up_row0, n_ff;
  const DeviceWeight* down;              // [n_embd][n_ff]
  const Buffer* attn_norm;               // [n_embd]
  const Buffer* ffn_norm;                // [n_embd]
  float eps;
  Glu act;
  int n_rot;
  const Buffer* cs;                      // [n_rot / 2] (cos, sin) of the row's position
};
bool decode_layer_supported(const Context& c, const AttentionShape& s, const DecodeLayer& L);
void decode_layer(Context& c, const AttentionShape& s, const DecodeLayer& L, Buffer& x, Buffer& qkv,
                  Buffer& k_cache, Buffer& v_cache, int n_past, Buffer& attn, Buffer& lse, Buffer& act,
                  const DecodeSplit& split, Buffer& sync);
constexpr int kDecodeLayerSyncInts = 11;
// attention.cl: mass[g][j] += attention paid to entry j by rows [r0, r1) (summed over group)
void attention_mass(Context& c, const AttentionShape& s, const Buffer& q, int ldq, const Buffer& k_cache,
                    int n_past, int r0, int r1, const Buffer& lse, Buffer& mass, size_t mass_offset_floats);

// cross_entropy.cl
void ce_init(Context& c, Buffer& m, Buffer& s, Buffer& tl, int n);
void ce_update(Context& c, const Buffer& logits, int n, int tile, int v0, const Buffer& targets, Buffer& m,
               Buffer& s, Buffer& tl);

// argmax.cl: out[0] = the first index of the largest of x[0 .. n) (NaN never wins; 0 for a row
// of NaN), the greedy token of a row of logits.      x: [n] floats   out: [1] int
void argmax_row(Context& c, const Buffer& x, int n, Buffer& out);

// act_round.cl (--round-activations): x rounded in place to the values llama.cpp's CPU backend
// multiplies after quantizing a product's input to the weight type's 8-bit (or f16) input
// format; the kinds and rules are in the .cl header.            x: [n_rows][k]
enum class ActRound { None, Q8_0, Q8_K, F16 };
ActRound act_round_for(gguf::TensorType weight);  // the input format llama.cpp pairs with it
const char* act_round_name(ActRound kind);
void round_activations(Context& c, Buffer& x, int n_rows, int k, ActRound kind);

}  // namespace infinipot::ops
