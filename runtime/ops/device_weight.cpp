// wtype_option: the weight type of the kernels that read weights (quant_formats.cl).
#include "runtime/ops/device_weight.h"

#include <string>

#include "model_loader/quant.h"
#include "runtime/cl_error.h"

namespace infinipot::ops {

std::string wtype_option(gguf::TensorType t) {
  const uint32_t id = static_cast<uint32_t>(t);
  if (!quant::is_known_type(id) || !quant::traits(t).on_device)
    throw cl::ClError("no device kernel for weight type id " + std::to_string(id) +
                      " (supported on device: " + quant::device_type_names() + ")");
  return "-DWTYPE=" + std::to_string(id);
}

}  // namespace infinipot::ops
