// Block layouts of the ggml tensor types we support, and plain C++ reference
// (de)quantizers. The device kernels in cl_kernels/dequant*.cl and matvec*.cl are tested
// against dequantize_row; quantize_row is used to write test models.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "model_loader/gguf.h"

namespace infinipot::quant {

using gguf::TensorType;

struct TypeTraits {
  const char* name;      // "Q4_1"
  int64_t block_elems;   // elements per block (1 for F32/F16)
  size_t block_bytes;    // bytes per block
  bool supported;        // the CPU reference can (de)quantize it
  bool on_device;        // the OpenCL kernels (cl_kernels/quant_formats.cl) read it
};

// Known types get their traits; unknown ids throw gguf::GgufError naming the id.
const TypeTraits& traits(TensorType t);
bool is_known_type(uint32_t raw_type_id);
// "F32, F16, Q4_0, ...": the types the device kernels read (TypeTraits::on_device).
std::string device_type_names();
// Bytes for n elements; throws if n is not a multiple of the block size.
size_t row_bytes(TensorType t, int64_t n);

void dequantize_row(TensorType t, const void* src, float* dst, int64_t n);
void quantize_row(TensorType t, const float* src, void* dst, int64_t n);

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);

}  // namespace infinipot::quant
