// What every launcher in runtime/ops/ takes: the OpenCL context and buffers, and a weight
// matrix on the device with the -D option of the kernels that read one (quant_formats.cl).
// Activations are row-major float: "[n][k]" means n rows of k floats.
#pragma once
#include <string>
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

// -DWTYPE=<ggml id> for the kernels that read weights (quant_formats.cl); throws, naming the
// supported types, for a type without a device kernel.
std::string wtype_option(gguf::TensorType t);

}  // namespace infinipot::ops
