// Plain C++ references for every OpenCL kernel in cl_kernels/. They favour being obviously
// correct over being fast: loops in the textbook order, sums and transcendental functions in
// double, weights decoded by quant::dequantize_row. Layouts match the kernel headers and the
// launchers in runtime/ops/ ("[n][k]" = n rows of k floats, row-major).
#pragma once
#include <cstdint>
#include <vector>
#include "model_loader/quant.h"

namespace infinipot::ref {

using quant::TensorType;

// ---- weights (embedding.cl, matvec.cl, dequant.cl) -------------------------------------

// blocks: [rows][row_bytes(t, cols)] ggml blocks -> [rows][cols] floats.
std::vector<float> dequantize_rows(TensorType t, const void* blocks, int rows, int cols);

// out[i][:] = dequant(table row ids[i])                         out: [ids.size()][cols]
std::vector<float> embed(TensorType t, const void* table, int cols, const std::vector<int>& ids);

// y[r*ldy + o] (+)= sum_k W[o][k] x[r][k]                        W: [rows][cols]  x: [n_rows][cols]
void matvec(const float* W, int rows, int cols, const float* x, int n_rows, float* y, int ldy, bool accumulate);

// W: [rows][cols] -> [pad16(rows)/16 panels][cols][16], rows past `rows` zero (gemm.cl's Bp).
std::vector<float> to_panels(const float* W, int rows, int cols);

// X: [m][ldx] -> [pad(m)/panel panels][k][panel], rows past m zero (gemm.cl's Ap; panel =
// ops::a_panel_rows of the tile height).
std::vector<float> pack_a(const float* X, int m, int k, int ldx, int panel);

// C[i*ldc + j] (+)= sum_k A[i][k] B[j][k]                        A: [m][lda]  B: [n][ldb]
void gemm_abt(int m, int n, int k, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
              bool accumulate);

// ---- integer decode products (matvec_q8.cl) ---------------------------------------------

// One 32-element block of a quantized input row: d = max|x| / 127, q = round_half_even(x / d)
// (0 when d = 0), s = d * sum(q); element j sits in q[q8_slot(j)]. The kernel's layout, byte
// for byte.
struct Q8Block {
  float d, s;
  int8_t q[32];
};
static_assert(sizeof(Q8Block) == 40, "matvec_q8.cl reads 40-byte blocks");
// Where element j of a block is stored: each half's even elements, then its odd ones
// (0 2 .. 14 | 1 3 .. 15 | 16 18 .. 30 | 17 .. 31; matvec_q8.cl says why).
inline int q8_slot(int j) { return (j / 16) * 16 + (j % 2) * 8 + (j % 16) / 2; }

// x: [n_rows][k], k a multiple of 32 -> [n_rows][k/32] blocks.
std::vector<Q8Block> quantize_q8(const float* x, int n_rows, int k);

// y[r*ldy + o] (+)= sum_b term(W[o] block b, xq[r] block b), the terms of matvec_q8.cl's header
// (Q4_0: dw dx sum((qw-8) qx); Q4_1: dw dx sum(qw qx) + mw sx; Q8_0: dw dx sum(qw qx)) with the
// integer sums exact and the rest in double. mag, when given, receives per output
// ([n_rows][ldy], other entries 0) sum_b |dw dx| sum_k |qw_k qx_k| + |mw sx|: the magnitude a
// float evaluation of partial sums rounds against (like sum_k |a_k b_k| for a float dot).
void matvec_q8(TensorType t, const void* W, int rows, int cols, const Q8Block* xq, int n_rows, float* y, int ldy,
               bool accumulate, std::vector<double>* mag = nullptr);

// How far a product of the 8-bit input (quantize_q8 of x) may be from the float product
// W x, per output [n_rows][rows]: x - q d is at most d/2 per element (plus the rounding of
// x / d, < 127 * 2^-24 d), so |W xq - W x| <= sum_k |W[o][k]| d_block(k) (0.5 + 1e-5); plus
// dot_ulp * sqrt(cols) * sum_k |W[o][k] x[k]| for the float evaluation. The worst case:
// typical errors are ~1/sqrt(32) of it, a wrong weight or block far above it.
std::vector<double> q8_input_rounding_bound(const float* W, int rows, int cols, const float* x, int n_rows,
                                            double dot_ulp);

// ---- layers (norm.cl, rope.cl, elementwise.cl) ------------------------------------------

// out[r][i] = x[r][i] / sqrt(mean_i x[r][i]^2 + eps) * w[i]      x, out: [n_rows][n]
void rms_norm(const float* x, const float* w, float* out, int n_rows, int n, float eps);

// RoPE, normal (adjacent-pair) mode: for pair i < n_rot/2 of a head of token t,
// angle = pos[t] * theta^(-2i/n_rot) (divided by freq_factors[i] when given: Llama 3's
// rope_freqs) and (x[2i], x[2i+1]) is rotated by it. In place on the
// q heads 0..n_head-1 and k heads n_head..n_head+n_kv_heads-1 of fused q|k|v rows; then token
// t's rotated key head g and value head g (columns v0 + g*head_dim, v0 = (n_head + n_kv_heads)
// * head_dim) go to slot slot0 + t of head g.
//   qkv: [n_tokens][ld]   k_cache, v_cache: [n_kv_heads][cap][head_dim]
void rope_store_kv(float* qkv, int ld, int n_head, int n_kv_heads, int head_dim, int n_rot, const int* pos,
                   float theta, float* k_cache, float* v_cache, int cap, int slot0, int n_tokens,
                   const float* freq_factors = nullptr);

// Re-rotates rows of a key cache by delta[h*cap + slot] positions, slots < n_slots.
//   k_cache: [n_heads][cap][head_dim]
void rope_shift(float* k_cache, int n_heads, int cap, int head_dim, int n_rot, const int* delta, int n_slots,
                float theta, const float* freq_factors = nullptr);

// act[r][i] = silu(gu[r][i]) * gu[r][n_ff + i]                   gu: [n_rows][2*n_ff]
void swiglu(const float* gu, int n_rows, int n_ff, float* act);
// act[r][i] = gelu_tanh(gu[r][i]) * gu[r][n_ff + i], in double.
void geglu_tanh(const float* gu, int n_rows, int n_ff, float* act);

// ---- KV store and attention (kv_cache.cl, attention.cl) ---------------------------------

// dst[h][j] = src[h][keep[h*n_keep + j]] for j < n_keep; other dst slots untouched.
void kv_gather(const float* src, float* dst, int n_kv_heads, int cap, int head_dim, const int* keep, int n_keep);

struct AttnShape {
  int n_heads, n_kv_heads, head_dim, cap;
  int window = 0;  // > 0: row i sees only slots > n_past + i - window (sliding window)
};

// Causal GQA attention. Query row i (slot n_past + i) sees slots 0 .. n_past + i of KV head
// h / (n_heads / n_kv_heads) (the last `window` of them when window > 0); scores are
// q.k / sqrt(head_dim).
//   q: [n][ldq] (head h at h*head_dim)  out: [n][ldo]  lse: [n][n_heads] log-sum-exp of the scores
void attention(const AttnShape& s, const float* q, int ldq, const float* k_cache, const float* v_cache, int n_past,
               int n, float* out, int ldo, float* lse);

// mass[g*cap + j] += sum over rows i in [r0, r1) that see slot j, and over the query heads h of
// KV group g, of softmax_j(q_i,h . k_g,j / sqrt(head_dim)). Computes its own softmax (no lse input).
//   mass: [n_kv_heads][cap]
void attention_mass(const AttnShape& s, const float* q, int ldq, const float* k_cache, int n_past, int r0, int r1,
                    float* mass);

// ---- loss (cross_entropy.cl) ------------------------------------------------------------

struct CrossEntropyRow {
  double lse;            // log sum_v exp(logits[v])
  double target_logit;   // logits[target], 0 when the row is not scored
  double nll;            // lse - target_logit, 0 when the row is not scored
};
// logits: [n][vocab]; targets[r] = -1 leaves row r unscored.
std::vector<CrossEntropyRow> cross_entropy(const float* logits, int n, int vocab, const int* targets);

// act_round.cl: x's rows of k rounded in blocks of `block` (32: Q8_0, 256: Q8_K, 1: f16),
// as llama.cpp's CPU backend quantizes a product's input.
void round_activations(std::vector<float>& x, int k, int block);

}  // namespace infinipot::ref
