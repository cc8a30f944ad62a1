#include "tests/support/cpu_ref.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>

namespace infinipot::ref {
namespace {

size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

double dot(const float* a, const float* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += double(a[i]) * double(b[i]);
  return s;
}

// Rotates the first n_rot/2 adjacent pairs of one head by pos * theta^(-2i/n_rot).
void rotate_head(float* x, int n_rot, double pos, float theta, const float* freq_factors) {
  for (int i = 0; i < n_rot / 2; ++i) {
    double angle = pos * std::pow(double(theta), -2.0 * i / n_rot);
    if (freq_factors) angle /= freq_factors[i];
    const double c = std::cos(angle), s = std::sin(angle);
    const double x0 = x[2 * i], x1 = x[2 * i + 1];
    x[2 * i] = float(x0 * c - x1 * s);
    x[2 * i + 1] = float(x0 * s + x1 * c);
  }
}

}  // namespace

// ---- weights ------------------------------------------------------------------------------

std::vector<float> dequantize_rows(TensorType t, const void* blocks, int rows, int cols) {
  const size_t rb = quant::row_bytes(t, cols);
  std::vector<float> out(size_t(rows) * cols);
  for (int r = 0; r < rows; ++r)
    quant::dequantize_row(t, static_cast<const uint8_t*>(blocks) + r * rb, out.data() + size_t(r) * cols, cols);
  return out;
}

std::vector<float> embed(TensorType t, const void* table, int cols, const std::vector<int>& ids) {
  const size_t rb = quant::row_bytes(t, cols);
  std::vector<float> out(ids.size() * cols);
  for (size_t i = 0; i < ids.size(); ++i)
    quant::dequantize_row(t, static_cast<const uint8_t*>(table) + ids[i] * rb, out.data() + i * cols, cols);
  return out;
}

void matvec(const float* W, int rows, int cols, const float* x, int n_rows, float* y, int ldy, bool accumulate) {
  for (int r = 0; r < n_rows; ++r)
    for (int o = 0; o < rows; ++o) {
      const double d = dot(W + size_t(o) * cols, x + size_t(r) * cols, cols);
      float& dst = y[size_t(r) * ldy + o];
      dst = float(accumulate ? double(dst) + d : d);
    }
}

std::vector<Q8Block> quantize_q8(const float* x, int n_rows, int k) {
  std::vector<Q8Block> out(size_t(n_rows) * (k / 32));
  for (size_t i = 0; i < out.size(); ++i) {
    const float* xb = x + i * 32;  // rows are whole blocks, so block i starts at element 32 i
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    Q8Block& b = out[i];
    b.d = amax / 127.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      // nearbyint in the default rounding mode rounds half to even, as convert_char_rte does.
      const int8_t q = static_cast<int8_t>(b.d == 0.0f ? 0 : std::nearbyint(xb[j] / b.d));
      b.q[q8_slot(j)] = q;
      sum += q;
    }
    b.s = b.d * float(sum);
  }
  return out;
}

void matvec_q8(TensorType t, const void* W, int rows, int cols, const Q8Block* xq, int n_rows, float* y, int ldy,
               bool accumulate, std::vector<double>* mag) {
  const size_t rb = quant::row_bytes(t, cols);
  const int nb = cols / 32;
  auto half_at = [](const uint8_t* p) { return double(quant::fp16_to_fp32(uint16_t(p[0] | (p[1] << 8)))); };
  if (mag) mag->assign(size_t(n_rows) * ldy, 0.0);
  for (int r = 0; r < n_rows; ++r)
    for (int o = 0; o < rows; ++o) {
      const uint8_t* row = static_cast<const uint8_t*>(W) + size_t(o) * rb;
      double sum = 0, abs_sum = 0;
      for (int b = 0; b < nb; ++b) {
        const Q8Block& x = xq[size_t(r) * nb + b];
        int64_t dot = 0, abs_dot = 0;
        double scale = 0, min_term = 0;  // Q4_1's mw * sx is summed apart by the kernel
        if (t == TensorType::Q4_0 || t == TensorType::Q4_1) {
          const bool q41 = t == TensorType::Q4_1;
          const uint8_t* blk = row + size_t(b) * (q41 ? 20 : 18);
          const uint8_t* qs = blk + (q41 ? 4 : 2);
          const int offset = q41 ? 0 : 8;
          for (int j = 0; j < 16; ++j) {  // low nibbles are elements 0..15, high nibbles 16..31
            const int64_t lo = int64_t((qs[j] & 15) - offset) * x.q[q8_slot(j)];
            const int64_t hi = int64_t((qs[j] >> 4) - offset) * x.q[q8_slot(16 + j)];
            dot += lo + hi;
            abs_dot += std::abs(lo) + std::abs(hi);
          }
          scale = half_at(blk) * double(x.d);
          if (q41) min_term = half_at(blk + 2) * double(x.s);
        } else if (t == TensorType::Q8_0) {
          const uint8_t* blk = row + size_t(b) * 34;
          for (int j = 0; j < 32; ++j) {
            const int64_t p = int64_t(static_cast<int8_t>(blk[2 + j])) * x.q[q8_slot(j)];
            dot += p;
            abs_dot += std::abs(p);
          }
          scale = half_at(blk) * double(x.d);
        } else {
          throw std::invalid_argument("ref::matvec_q8: Q4_0, Q4_1 or Q8_0 weights only");
        }
        sum += scale * double(dot) + min_term;
        abs_sum += std::fabs(scale) * double(abs_dot) + std::fabs(min_term);
      }
      float& dst = y[size_t(r) * ldy + o];
      dst = float(accumulate ? double(dst) + sum : sum);
      if (mag) (*mag)[size_t(r) * ldy + o] = abs_sum;
    }
}

std::vector<double> q8_input_rounding_bound(const float* W, int rows, int cols, const float* x, int n_rows,
                                            double dot_ulp) {
  const std::vector<Q8Block> xq = quantize_q8(x, n_rows, cols);
  std::vector<double> bound(size_t(n_rows) * rows);
  for (int r = 0; r < n_rows; ++r)
    for (int o = 0; o < rows; ++o) {
      double rounding = 0, dot_mag = 0;
      for (int j = 0; j < cols; ++j) {
        const double w = std::fabs(W[size_t(o) * cols + j]);
        rounding += w * xq[size_t(r) * (cols / 32) + j / 32].d;
        dot_mag += w * std::fabs(x[size_t(r) * cols + j]);
      }
      bound[size_t(r) * rows + o] = (0.5 + 1e-5) * rounding + dot_ulp * std::sqrt(double(cols)) * dot_mag;
    }
  return bound;
}

std::vector<float> to_panels(const float* W, int rows, int cols) {
  std::vector<float> Bp(round_up(rows, 16) * cols, 0.0f);
  for (int o = 0; o < rows; ++o)
    for (int k = 0; k < cols; ++k) Bp[(size_t(o / 16) * cols + k) * 16 + o % 16] = W[size_t(o) * cols + k];
  return Bp;
}

std::vector<float> pack_a(const float* X, int m, int k, int ldx, int panel) {
  std::vector<float> Ap(round_up(m, panel) * k, 0.0f);
  for (int i = 0; i < m; ++i)
    for (int kk = 0; kk < k; ++kk) Ap[(size_t(i / panel) * k + kk) * panel + i % panel] = X[size_t(i) * ldx + kk];
  return Ap;
}

void gemm_abt(int m, int n, int k, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
              bool accumulate) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      const double d = dot(A + size_t(i) * lda, B + size_t(j) * ldb, k);
      float& dst = C[size_t(i) * ldc + j];
      dst = float(accumulate ? double(dst) + d : d);
    }
}

// ---- layers -------------------------------------------------------------------------------

void rms_norm(const float* x, const float* w, float* out, int n_rows, int n, float eps) {
  for (int r = 0; r < n_rows; ++r) {
    const float* xr = x + size_t(r) * n;
    const double scale = 1.0 / std::sqrt(dot(xr, xr, n) / n + double(eps));
    for (int i = 0; i < n; ++i) out[size_t(r) * n + i] = float(double(xr[i]) * scale * double(w[i]));
  }
}

void rope_store_kv(float* qkv, int ld, int n_head, int n_kv_heads, int head_dim, int n_rot, const int* pos,
                   float theta, float* k_cache, float* v_cache, int cap, int slot0, int n_tokens,
                   const float* freq_factors) {
  const int v0 = (n_head + n_kv_heads) * head_dim;
  for (int t = 0; t < n_tokens; ++t) {
    float* row = qkv + size_t(t) * ld;
    for (int h = 0; h < n_head + n_kv_heads; ++h) rotate_head(row + h * head_dim, n_rot, pos[t], theta, freq_factors);
    for (int g = 0; g < n_kv_heads; ++g) {
      const size_t dst = (size_t(g) * cap + slot0 + t) * head_dim;
      std::copy_n(row + (n_head + g) * head_dim, head_dim, k_cache + dst);
      std::copy_n(row + v0 + g * head_dim, head_dim, v_cache + dst);
    }
  }
}

void rope_shift(float* k_cache, int n_heads, int cap, int head_dim, int n_rot, const int* delta, int n_slots,
                float theta, const float* freq_factors) {
  for (int h = 0; h < n_heads; ++h)
    for (int slot = 0; slot < n_slots; ++slot)
      rotate_head(k_cache + (size_t(h) * cap + slot) * head_dim, n_rot, delta[size_t(h) * cap + slot], theta,
                  freq_factors);
}

void swiglu(const float* gu, int n_rows, int n_ff, float* act) {
  for (int r = 0; r < n_rows; ++r)
    for (int i = 0; i < n_ff; ++i) {
      const double g = gu[size_t(r) * 2 * n_ff + i];
      const double u = gu[size_t(r) * 2 * n_ff + n_ff + i];
      act[size_t(r) * n_ff + i] = float(g / (1.0 + std::exp(-g)) * u);
    }
}

void geglu_tanh(const float* gu, int n_rows, int n_ff, float* act) {
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  for (int r = 0; r < n_rows; ++r)
    for (int i = 0; i < n_ff; ++i) {
      const double g = gu[size_t(r) * 2 * n_ff + i];
      const double u = gu[size_t(r) * 2 * n_ff + n_ff + i];
      act[size_t(r) * n_ff + i] = float(0.5 * g * (1.0 + std::tanh(k * (g + 0.044715 * g * g * g))) * u);
    }
}

// ---- KV store and attention ---------------------------------------------------------------

void kv_gather(const float* src, float* dst, int n_kv_heads, int cap, int head_dim, const int* keep, int n_keep) {
  for (int h = 0; h < n_kv_heads; ++h)
    for (int j = 0; j < n_keep; ++j) {
      const int s = keep[size_t(h) * n_keep + j];
      std::copy_n(src + (size_t(h) * cap + s) * head_dim, head_dim, dst + (size_t(h) * cap + j) * head_dim);
    }
}

namespace {

// Softmax probabilities of query row i (at slot n_past + i), head h over the slots it sees;
// returns them with the log-sum-exp of the scores.
std::vector<double> attention_probs(const AttnShape& s, const float* q, int ldq, const float* k_cache, int n_past,
                                    int i, int h, double* lse) {
  const int g = h / (s.n_heads / s.n_kv_heads);
  const double scale = 1.0 / std::sqrt(double(s.head_dim));
  const float* qr = q + size_t(i) * ldq + size_t(h) * s.head_dim;
  std::vector<double> p(n_past + i + 1);
  double m = -std::numeric_limits<double>::infinity();
  const int first = s.window > 0 ? std::max(0, n_past + i - s.window + 1) : 0;
  for (int j = 0; j <= n_past + i; ++j) {
    p[j] = j < first ? -std::numeric_limits<double>::infinity()
                     : dot(qr, k_cache + (size_t(g) * s.cap + j) * s.head_dim, s.head_dim) * scale;
    m = std::max(m, p[j]);
  }
  double sum = 0;
  for (double& v : p) sum += (v = std::exp(v - m));
  for (double& v : p) v /= sum;
  if (lse) *lse = m + std::log(sum);
  return p;
}

}  // namespace

void attention(const AttnShape& s, const float* q, int ldq, const float* k_cache, const float* v_cache, int n_past,
               int n, float* out, int ldo, float* lse) {
  for (int i = 0; i < n; ++i)
    for (int h = 0; h < s.n_heads; ++h) {
      const int g = h / (s.n_heads / s.n_kv_heads);
      double row_lse = 0;
      const std::vector<double> p = attention_probs(s, q, ldq, k_cache, n_past, i, h, &row_lse);
      for (int d = 0; d < s.head_dim; ++d) {
        double acc = 0;
        for (size_t j = 0; j < p.size(); ++j) acc += p[j] * v_cache[(size_t(g) * s.cap + j) * s.head_dim + d];
        out[size_t(i) * ldo + size_t(h) * s.head_dim + d] = float(acc);
      }
      lse[size_t(i) * s.n_heads + h] = float(row_lse);
    }
}

void attention_mass(const AttnShape& s, const float* q, int ldq, const float* k_cache, int n_past, int r0, int r1,
                    float* mass) {
  const int group = s.n_heads / s.n_kv_heads;
  std::vector<double> total(size_t(s.n_kv_heads) * s.cap, 0.0);
  for (int i = r0; i < r1; ++i)
    for (int h = 0; h < s.n_heads; ++h) {
      const std::vector<double> p = attention_probs(s, q, ldq, k_cache, n_past, i, h, nullptr);
      for (size_t j = 0; j < p.size(); ++j) total[size_t(h / group) * s.cap + j] += p[j];
    }
  for (size_t e = 0; e < total.size(); ++e) mass[e] = float(double(mass[e]) + total[e]);
}

// ---- loss ---------------------------------------------------------------------------------

std::vector<CrossEntropyRow> cross_entropy(const float* logits, int n, int vocab, const int* targets) {
  std::vector<CrossEntropyRow> rows(n);
  for (int r = 0; r < n; ++r) {
    const float* row = logits + size_t(r) * vocab;
    const double m = *std::max_element(row, row + vocab);
    double sum = 0;
    for (int v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - m);
    CrossEntropyRow& out = rows[r];
    out.lse = m + std::log(sum);
    if (targets[r] >= 0) {
      out.target_logit = row[targets[r]];
      out.nll = out.lse - out.target_logit;
    } else {
      out.target_logit = 0;
      out.nll = 0;
    }
  }
  return rows;
}

// act_round.cl's rule (ops::round_activations): each block of `block` values of a row of k
// quantized to 8 bits and back as llama.cpp's CPU backend rounds a product's input (Q8_0:
// blocks of 32 with an f16 scale; Q8_K: 256, float scale), or each value through f16 (1).
namespace {
float half_round_act(float v) { return quant::fp16_to_fp32(quant::fp32_to_fp16(v)); }
}  // namespace

void round_activations(std::vector<float>& x, int k, int block) {
  if (block != 1 && block != 32 && block != 256)
    throw std::invalid_argument("ref::round_activations: block must be 1 (f16), 32 (Q8_0) or 256 (Q8_K)");
  if (k % block != 0 || x.size() % k != 0)
    throw std::invalid_argument("ref::round_activations: rows of " + std::to_string(k) +
                                " are not whole blocks of " + std::to_string(block));
  for (size_t b0 = 0; b0 < x.size(); b0 += block) {
    float* p = x.data() + b0;
    if (block == 1) {
      p[0] = half_round_act(p[0]);
      continue;
    }
    float amax = 0.f, m = 0.f;
    for (int j = 0; j < block; ++j)
      if (std::fabs(p[j]) > amax) amax = std::fabs(p[j]), m = p[j];
    if (amax == 0.f) {
      for (int j = 0; j < block; ++j) p[j] = 0.f;
      continue;
    }
    if (block == 32) {
      const float id = 127.f / amax, d = half_round_act(amax / 127.f);
      for (int j = 0; j < block; ++j) p[j] = std::nearbyint(p[j] * id) * d;
    } else {
      const float iscale = -127.f / m, d = 1.f / iscale;
      for (int j = 0; j < block; ++j) p[j] = std::fmin(127.f, std::nearbyint(iscale * p[j])) * d;
    }
  }
}

}  // namespace infinipot::ref
