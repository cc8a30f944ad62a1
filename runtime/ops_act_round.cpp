// Launcher and host reference of act_round.cl (--round-activations).
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "model_loader/quant.h"
#include "runtime/cl_error.h"
#include "runtime/ops.h"

namespace infinipot::ops {
namespace {

int block_of(ActRound kind) { return kind == ActRound::Q8_K ? 256 : kind == ActRound::Q8_0 ? 32 : 1; }

float half_round(float v) { return quant::fp16_to_fp32(quant::fp32_to_fp16(v)); }

}  // namespace

// ggml-cpu.c's vec_dot_type per weight type: the K-quants multiply Q8_K inputs, the 32-blocks
// Q8_0 (Q8_1 for Q4_1/Q5_1: the same values plus a sum this rounding need not model), F16
// weights F16 inputs, F32 weights the floats as they are.
ActRound act_round_for(gguf::TensorType weight) {
  using gguf::TensorType;
  switch (weight) {
    case TensorType::Q4_0: case TensorType::Q4_1: case TensorType::Q5_0: case TensorType::Q5_1:
    case TensorType::Q8_0:
      return ActRound::Q8_0;
    case TensorType::Q2_K: case TensorType::Q3_K: case TensorType::Q4_K: case TensorType::Q5_K:
    case TensorType::Q6_K:
      return ActRound::Q8_K;
    case TensorType::F16:
      return ActRound::F16;
    default:
      return ActRound::None;
  }
}

const char* act_round_name(ActRound kind) {
  switch (kind) {
    case ActRound::Q8_0: return "Q8_0";
    case ActRound::Q8_K: return "Q8_K";
    case ActRound::F16: return "F16";
    default: return "none";
  }
}

void round_activations(Context& c, Buffer& x, int n_rows, int k, ActRound kind) {
  if (kind == ActRound::None) return;
  const int block = block_of(kind);
  if (k % block != 0)
    throw cl::ClError("invalid launch: round_activations: a row of " + std::to_string(k) +
                      " is not a whole number of " + act_round_name(kind) + " blocks of " + std::to_string(block));
  if (x.bytes() < size_t(n_rows) * k * 4) throw cl::ClError("invalid launch: round_activations: input too small");
  const int kind_id = kind == ActRound::Q8_0 ? 1 : kind == ActRound::Q8_K ? 2 : 3;
  c.kernel("act_round.cl", "round_activations",
           "-DKIND=" + std::to_string(kind_id) + " -DBLOCK=" + std::to_string(block) + c.exact_divide_option())
      .args(x, k, n_rows)
      .launch(c.queue(), {size_t(k / block), size_t(n_rows)});
}

void round_activations_reference(std::vector<float>& x, int k, ActRound kind) {
  if (kind == ActRound::None) return;
  const int block = block_of(kind);
  if (k % block != 0 || x.size() % k != 0)
    throw std::invalid_argument("round_activations_reference: rows of " + std::to_string(k) +
                                " are not whole blocks of " + std::to_string(block));
  for (size_t b0 = 0; b0 < x.size(); b0 += block) {
    float* p = x.data() + b0;
    if (kind == ActRound::F16) {
      p[0] = half_round(p[0]);
      continue;
    }
    float amax = 0.f, m = 0.f;
    for (int j = 0; j < block; ++j)
      if (std::fabs(p[j]) > amax) amax = std::fabs(p[j]), m = p[j];
    if (amax == 0.f) {
      for (int j = 0; j < block; ++j) p[j] = 0.f;
      continue;
    }
    if (kind == ActRound::Q8_0) {
      const float id = 127.f / amax, d = half_round(amax / 127.f);
      for (int j = 0; j < block; ++j) p[j] = std::nearbyint(p[j] * id) * d;
    } else {
      const float iscale = -127.f / m, d = 1.f / iscale;
      for (int j = 0; j < block; ++j) p[j] = std::fmin(127.f, std::nearbyint(iscale * p[j])) * d;
    }
  }
}

}  // namespace infinipot::ops
