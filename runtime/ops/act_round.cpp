// Launcher of act_round.cl (the forward pass's round_activations option; its host reference
// is tests/support/cpu_ref.cpp's).
#include "runtime/ops/act_round.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "model_loader/quant.h"
#include "runtime/cl_error.h"

namespace infinipot::ops {

constexpr const char* kSources = "act_round.cl";

namespace {

int block_of(ActRound kind) { return kind == ActRound::Q8_K ? 256 : kind == ActRound::Q8_0 ? 32 : 1; }

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
  c.kernel(kSources, "round_activations",
           "-DKIND=" + std::to_string(kind_id) + " -DBLOCK=" + std::to_string(block) + c.exact_divide_option())
      .args(x, k, n_rows)
      .launch(c.queue(), {size_t(k / block), size_t(n_rows)});
}

}  // namespace infinipot::ops
