// Launcher of cl_kernels/act_round.cl (--round-activations); reference
// ref::round_activations, tests tests/runtime/test_act_round.cpp.
#pragma once
#include "model_loader/gguf.h"
#include "runtime/ops/device_weight.h"

namespace infinipot::ops {

// act_round.cl (--round-activations): x rounded in place to the values llama.cpp's CPU backend
// multiplies after quantizing a product's input to the weight type's 8-bit (or f16) input
// format; the kinds and rules are in the .cl header.            x: [n_rows][k]
enum class ActRound { None, Q8_0, Q8_K, F16 };
ActRound act_round_for(gguf::TensorType weight);  // the input format llama.cpp pairs with it
const char* act_round_name(ActRound kind);
void round_activations(Context& c, Buffer& x, int n_rows, int k, ActRound kind);

}  // namespace infinipot::ops
