// Per-device tuning read from platforms/tuning.json (embedded at build time), keyed
// vendor -> device with defaults. Nothing else in the code looks at device names.
#pragma once
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include "runtime/device.h"

namespace infinipot::cl {

// The values come from platforms/tuning.json only: its top-level "default" must give every
// one of them (lookup_tuning refuses a file that does not), so the JSON is the one source of
// defaults; the zeros below are never used.
struct Tuning {
  std::string vendor_key = "default";  // which vendor entry matched
  std::string device_key = "default";  // which device entry matched
  std::string gemm_backend;            // "packed" | "clblast"
  // Rows per work-item of gemm_packed (4, 6 or 8; each row holds a 16-float accumulator). The
  // file may say "auto": 8 where the device's native float vector is 16 wide (AVX-512: 8
  // registers of 32), 6 where it is 8 wide (AVX2's 16 registers: 12 accumulators, 8 rows
  // would spill), else 4 (GPUs; not measured there).
  int gemm_tile_rows = 0;
  int matvec_local = 0;                // work-group size of matvec kernels (1 = driver loops)
  int norm_local = 0;                  // work-group size of row reductions
  int attention_tile_rows = 0;         // query rows per work-group in attention_tiled (1 = untiled)
  int attention_key_tile = 0;          // keys staged in local memory per step
  // Prefill attention runs attention_vec16 (a work-item per block of query rows and a query
  // head, the rows in vector lanes; what a CPU device runs best) instead of attention_tiled /
  // attention.
  bool attention_vec16 = false;
  // Query rows per attention_vec16 work-item, one per vector lane: 4, 8 or 16. Each key and
  // value is loaded once for them all. 0 ("auto" in the file): 16 (ops::attention says why).
  int attention_vec16_rows = 0;
  // Decode attention: work-items per KV head sharing the cache's keys (attention_decode_split);
  // 1 = one work-item walks them all (what a CPU device runs best; a GPU idles on it).
  int attention_decode_split = 0;
  int prefill_chunk = 0;               // tokens per prefill step
  std::vector<std::string> matvec_int8;  // weight types ("Q4_0", "Q4_1", "Q8_0") whose decode
                                        // products run in integers (matvec_q8.cl); others: float
  bool matvec_fusion = false;          // decode products take in their neighbours (matvec.cl): the
                                       // RMSNorm, the GLU, RoPE + KV store; false: separate launches
  bool matvec_norm_fusion = false;     // under matvec_fusion, whether the RMSNorm goes inside too (every
                                       // work-item recomputes it) or runs as its own launch before
  // Decode products prefetch their weights this many bytes ahead of what they read (matvec.cl,
  // __builtin_prefetch; 0: none, for devices whose compiler lacks it or gains nothing).
  int matvec_prefetch = 0;
  // The forms of the CPU's own 8-bit dot ("avx512_vnni", "avx2": DeviceInfo::native_dot) in
  // which decode products of Q4_0, Q4_1 and Q8_0 weights may run (cl_kernels/native_dot.cl)
  // when the device has that form; in work-groups of matvec_native_local items, each group
  // quantizing the input row once.
  std::vector<std::string> matvec_native_dot;
  // The weight types ("Q4_0", "Q4_1", "Q8_0") whose decode products take that native dot.
  std::vector<std::string> matvec_native_types;
  int matvec_native_local = 0;
  // The weight types ("Q4_0", "Q4_1", "Q8_0") whose prefill products run in the CPU's integer
  // dot (cl_kernels/gemm_native.cl: the input quantized to 16 bits per 32-block, vpdpwssd) where
  // the device has AVX-512 VNNI and matvec_native_dot lists it; the others in the float GEMM.
  std::vector<std::string> gemm_native_types;
  // Decode of one row runs each transformer block in one launch (cl_kernels/decode_layer.cl:
  // a work-group per compute unit, the block's five steps shared out by counters), where the
  // model and the tuned kernels allow it (ops::decode_layer_supported); else 5 launches a block
  // (6 where decode attention splits).
  bool decode_layer_launch = false;
  nlohmann::json clblast = nlohmann::json::object();  // kernel -> {param: value} overrides

  nlohmann::json to_json() const;
};

// One row per tunable key: the one place that says its name, which values the file may give
// (read: checks and stores one; write: the value as JSON), what `infinipot tune` tries and
// which time judges it, and what it does (`infinipot tune --keys` prints them as a table).
struct TuningKey {
  enum class Judge { Prefill, Decode, Both };
  const char* name;
  const char* values;  // the values the file may give, in words
  const char* doc;
  Judge judge;
  std::vector<nlohmann::json> candidates;  // what `infinipot tune` tries, in order
  void (*read)(Tuning& t, const nlohmann::json& v, const DeviceInfo& dev);  // throws ClError naming the key
  nlohmann::json (*write)(const Tuning& t);
};
// The keys, in the order `infinipot tune` searches them.
const std::vector<TuningKey>& tuning_keys();

// Reads the embedded data (or INFINIPOT_PLATFORMS_FILE when set, for experiments). overrides:
// values applied last (`infinipot tune` tries candidates this way); checked like the file's.
Tuning lookup_tuning(const DeviceInfo& dev, const nlohmann::json& overrides = nlohmann::json::object());

}  // namespace infinipot::cl
