// How weight rows lie on the device (cl_kernels/quant_formats.cl reads them): as in the GGUF
// file, except that a Q4_0 or Q4_1 row puts its blocks' scales first,
//   GGUF:   [d m q0..q15] [d m q0..q15] ...          (Q4_0: no m)
//   device: [d m] [d m] ... | [q0..q15] [q0..q15] ...
// the same bytes in another order. A row's scales then sit together, so a decode product
// converts several blocks' scales as one vector instead of a scalar read and insert per
// block, which was a fifth of the compiled Q4_1 block loop on PoCL (docs/benchmarks.md).
#pragma once
#include <cstddef>
#include <cstdint>

#include "model_loader/gguf.h"

namespace infinipot::cl {

// True when `t` rows are stored in another order on the device than in the file.
bool scales_first_on_device(gguf::TensorType t);

// Rewrites n_rows rows of `t` (row_bytes each, GGUF order) in place into the device order.
void to_device_layout(gguf::TensorType t, uint8_t* rows, size_t n_rows, size_t row_bytes);

}  // namespace infinipot::cl
