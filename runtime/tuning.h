// Per-device tuning read from platforms/tuning.json (embedded at build time), keyed
// vendor -> device with defaults. Nothing else in the code looks at device names.
#pragma once
#include <string>
#include <nlohmann/json.hpp>
#include "runtime/device.h"

namespace infinipot::cl {

struct Tuning {
  std::string vendor_key = "default";  // which vendor entry matched
  std::string device_key = "default";  // which device entry matched
  std::string gemm_backend = "packed"; // "packed" | "clblast"
  int matvec_local = 64;               // work-group size of matvec kernels (1 = driver loops)
  int norm_local = 64;                 // work-group size of row reductions
  int attention_tile_rows = 16;        // query rows per work-group in attention_tiled (1 = untiled)
  int attention_key_tile = 32;         // keys staged in local memory per step
  int prefill_chunk = 512;             // tokens per prefill step
  nlohmann::json clblast = nlohmann::json::object();  // kernel -> {param: value} overrides

  nlohmann::json to_json() const;
};

// Reads the embedded data (or INFINIPOT_PLATFORMS_FILE when set, for experiments).
Tuning lookup_tuning(const DeviceInfo& dev);

}  // namespace infinipot::cl
