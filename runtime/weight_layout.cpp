#include "runtime/weight_layout.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "model_loader/quant.h"
#include "model_loader/quant_blocks.h"

namespace infinipot::cl {

bool scales_first_on_device(gguf::TensorType t) {
  return t == gguf::TensorType::Q4_0 || t == gguf::TensorType::Q4_1;
}

void to_device_layout(gguf::TensorType t, uint8_t* rows, size_t n_rows, size_t row_bytes) {
  if (!scales_first_on_device(t)) return;
  // A block is its scale halves, then its quant bytes (model_loader/quant_blocks.h).
  const size_t block = quant::traits(t).block_bytes, qs = sizeof(quant::BlockQ4_0::qs), sb = block - qs;
  if (row_bytes % block != 0)
    throw std::invalid_argument("to_device_layout: a row of " + std::to_string(row_bytes) +
                                " bytes is not whole blocks of " + std::to_string(block));
  const size_t nb = row_bytes / block;
  std::vector<uint8_t> out(row_bytes);
  for (size_t r = 0; r < n_rows; ++r) {
    uint8_t* row = rows + r * row_bytes;
    for (size_t b = 0; b < nb; ++b) {
      std::copy_n(row + b * block, sb, out.data() + b * sb);
      std::copy_n(row + b * block + sb, qs, out.data() + nb * sb + b * qs);
    }
    std::copy(out.begin(), out.end(), row);
  }
}

}  // namespace infinipot::cl
