// Host launchers, one per kernel family in cl_kernels/: runtime/ops/<family>.h declares the
// launchers of cl_kernels/<family>.cl (tests: tests/runtime/test_<family>.cpp). Each validates
// its arguments, picks the compiled variant (-D options) and the NDRange; the forward pass
// calls only these. This header includes them all.
// Activations are row-major float: "[n][k]" means n rows of k floats.
#pragma once
#include "runtime/ops/act_round.h"
#include "runtime/ops/argmax.h"
#include "runtime/ops/attention.h"
#include "runtime/ops/cross_entropy.h"
#include "runtime/ops/decode_layer.h"
#include "runtime/ops/dequant.h"
#include "runtime/ops/device_weight.h"
#include "runtime/ops/elementwise.h"
#include "runtime/ops/embedding.h"
#include "runtime/ops/gemm.h"
#include "runtime/ops/gemm_native.h"
#include "runtime/ops/kv_cache.h"
#include "runtime/ops/matvec.h"
#include "runtime/ops/matvec_q8.h"
#include "runtime/ops/norm.h"
#include "runtime/ops/rope.h"
