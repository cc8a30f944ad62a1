#include "runtime/tuning.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "runtime/cl_error.h"
#include "runtime/embedded.h"

namespace infinipot::cl {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

nlohmann::json load_data() {
  std::string text;
  if (const char* path = std::getenv("INFINIPOT_PLATFORMS_FILE")) {
    std::ifstream in(path);
    if (!in) throw ClError(std::string("INFINIPOT_PLATFORMS_FILE=") + path + " cannot be read");
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  } else {
    text = embedded_text("tuning.json");
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw ClError(std::string("platforms/tuning.json is not valid JSON: ") + e.what());
  }
}

using nlohmann::json;
using Judge = TuningKey::Judge;

[[noreturn]] void refuse(const char* key, const std::string& want, const json& got) {
  throw ClError(std::string("platforms/tuning.json: '") + key + "' must be " + want + ", got " + got.dump());
}

int whole(const char* key, const json& v, long long lo, long long hi) {
  if (!v.is_number_integer() || v.get<long long>() < lo || v.get<long long>() > hi)
    refuse(key, "a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", v);
  return v.get<int>();
}

bool flag(const char* key, const json& v) {
  if (!v.is_boolean()) refuse(key, "true or false", v);
  return v.get<bool>();
}

// A list of strings, each among `allowed`.
std::vector<std::string> list_of(const char* key, const json& v, const std::vector<std::string>& allowed,
                                 const char* what) {
  bool ok = v.is_array();
  for (const auto& x : ok ? v : json::array())
    ok = ok && x.is_string() && std::find(allowed.begin(), allowed.end(), x.get<std::string>()) != allowed.end();
  if (!ok) {
    std::string among;
    for (const std::string& a : allowed) among += (among.empty() ? "\"" : ", \"") + a + "\"";
    refuse(key, std::string("a list of ") + what + " among " + among, v);
  }
  return v.get<std::vector<std::string>>();
}

const std::vector<std::string> kIntTypes = {"Q4_0", "Q4_1", "Q8_0"};
const json kTypeLists[] = {json::array(), {"Q4_0", "Q4_1"}, {"Q4_0", "Q4_1", "Q8_0"}};
const std::vector<json> kTypeCandidates(std::begin(kTypeLists), std::end(kTypeLists));
const std::vector<json> kBools = {false, true};
const std::vector<json> kGroups = {1, 4, 16, 32, 64, 128, 256};  // work-group sizes

std::vector<TuningKey> make_keys() {
  return {
      {"gemm_backend", "\"packed\" or \"clblast\"",
       "prefill products: our cl_kernels/gemm.cl (\"packed\") or CLBlast's (weights dequantized row-major)",
       Judge::Prefill, {"packed", "clblast"},
       [](Tuning& t, const json& v, const DeviceInfo&) {
         if (v != "packed" && v != "clblast") refuse("gemm_backend", "\"packed\" or \"clblast\"", v);
         t.gemm_backend = v.get<std::string>();
       },
       [](const Tuning& t) { return json(t.gemm_backend); }},
      {"gemm_tile_rows", "4, 6, 8 or \"auto\"",
       "rows per work-item of gemm_packed, each a 16-float accumulator; auto: 8 where the native float vector is "
       "16 wide (AVX-512), 6 where 8 wide (AVX2: 8 would spill), else 4",
       Judge::Prefill, {4, 6, 8},
       [](Tuning& t, const json& v, const DeviceInfo& dev) {
         if (v == "auto") t.gemm_tile_rows = dev.native_float_width >= 16 ? 8 : dev.native_float_width == 8 ? 6 : 4;
         else if (v == 4 || v == 6 || v == 8) t.gemm_tile_rows = v.get<int>();
         else refuse("gemm_tile_rows", "4, 6, 8 or \"auto\"", v);
       },
       [](const Tuning& t) { return json(t.gemm_tile_rows); }},
      {"gemm_native_types", "a list of \"Q4_0\", \"Q4_1\", \"Q8_0\"",
       "weight types whose prefill products run in the CPU's integer dot (gemm_native.cl, vpdpwssd) where the "
       "device has AVX-512 VNNI and matvec_native_dot lists it",
       Judge::Prefill, kTypeCandidates,
       [](Tuning& t, const json& v, const DeviceInfo&) {
         t.gemm_native_types = list_of("gemm_native_types", v, kIntTypes, "weight types");
       },
       [](const Tuning& t) { return json(t.gemm_native_types); }},
      {"prefill_chunk", "a whole number in [1, 65536]", "tokens per prefill step", Judge::Prefill, {128, 256, 512},
       [](Tuning& t, const json& v, const DeviceInfo&) { t.prefill_chunk = whole("prefill_chunk", v, 1, 65536); },
       [](const Tuning& t) { return json(t.prefill_chunk); }},
      {"attention_vec16", "true or false",
       "prefill attention runs attention_vec16 (a work-item per block of query rows, the rows in vector lanes: what "
       "a CPU device runs best) instead of attention_tiled",
       Judge::Prefill, kBools,
       [](Tuning& t, const json& v, const DeviceInfo&) { t.attention_vec16 = flag("attention_vec16", v); },
       [](const Tuning& t) { return json(t.attention_vec16); }},
      {"attention_vec16_rows", "4, 8, 16 or \"auto\"",
       "query rows per attention_vec16 work-item, one per vector lane, sharing each key and value load; auto: 16",
       Judge::Prefill, {4, 8, 16},
       [](Tuning& t, const json& v, const DeviceInfo&) {
         if (v == "auto") t.attention_vec16_rows = 0;
         else if (v == 4 || v == 8 || v == 16) t.attention_vec16_rows = v.get<int>();
         else refuse("attention_vec16_rows", "4, 8, 16 (rows per work-item, one per vector lane) or \"auto\"", v);
       },
       [](const Tuning& t) { return t.attention_vec16_rows > 0 ? json(t.attention_vec16_rows) : json("auto"); }},
      {"attention_tile_rows", "a whole number in [1, 65536]", "query rows per work-group in attention_tiled (1: untiled)",
       Judge::Prefill, {1, 8, 16, 32},
       [](Tuning& t, const json& v, const DeviceInfo&) {
         t.attention_tile_rows = whole("attention_tile_rows", v, 1, 65536);
       },
       [](const Tuning& t) { return json(t.attention_tile_rows); }},
      {"attention_key_tile", "a whole number in [1, 65536]", "keys attention_tiled stages in local memory per step",
       Judge::Prefill, {16, 32, 64},
       [](Tuning& t, const json& v, const DeviceInfo&) {
         t.attention_key_tile = whole("attention_key_tile", v, 1, 65536);
       },
       [](const Tuning& t) { return json(t.attention_key_tile); }},
      {"attention_decode_split", "a whole number in [1, 65536]",
       "decode attention: work-items per KV head sharing the cache's keys (1: one walks them all, what a CPU runs "
       "best; a GPU idles on it)",
       Judge::Decode, {1, 8, 32, 64},
       [](Tuning& t, const json& v, const DeviceInfo&) {
         t.attention_decode_split = whole("attention_decode_split", v, 1, 65536);
       },
       [](const Tuning& t) { return json(t.attention_decode_split); }},
      {"matvec_int8", "a list of \"Q4_0\", \"Q4_1\", \"Q8_0\"",
       "weight types whose decode products run in integers (matvec_q8.cl: each input quantized once); others in "
       "floats",
       Judge::Decode, kTypeCandidates,
       [](Tuning& t, const json& v, const DeviceInfo&) {
         t.matvec_int8 = list_of("matvec_int8", v, kIntTypes, "weight types");
       },
       [](const Tuning& t) { return json(t.matvec_int8); }},
      {"matvec_fusion", "true or false",
       "decode products take in their neighbours (matvec.cl): the RMSNorm, the GLU, RoPE + KV store; false: "
       "separate launches",
       Judge::Decode, kBools,
       [](Tuning& t, const json& v, const DeviceInfo&) { t.matvec_fusion = flag("matvec_fusion", v); },
       [](const Tuning& t) { return json(t.matvec_fusion); }},
      {"matvec_norm_fusion", "true or false",
       "under matvec_fusion, whether the RMSNorm goes inside too (every work-item recomputes it) or runs before",
       Judge::Decode, kBools,
       [](Tuning& t, const json& v, const DeviceInfo&) { t.matvec_norm_fusion = flag("matvec_norm_fusion", v); },
       [](const Tuning& t) { return json(t.matvec_norm_fusion); }},
      {"matvec_local", "a whole number in [1, 65536]", "work-group size of the decode products (1: the driver loops)",
       Judge::Decode, kGroups,
       [](Tuning& t, const json& v, const DeviceInfo&) { t.matvec_local = whole("matvec_local", v, 1, 65536); },
       [](const Tuning& t) { return json(t.matvec_local); }},
      {"matvec_prefetch", "0 or a multiple of 64 up to 65536",
       "bytes ahead the decode products prefetch their weights (__builtin_prefetch; 0: none)", Judge::Decode,
       {0, 1024, 4096},
       [](Tuning& t, const json& v, const DeviceInfo&) {
         if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > 65536 ||
             v.get<long long>() % 64 != 0)
           refuse("matvec_prefetch", "0 (none) or bytes ahead, a multiple of 64 up to 65536", v);
         t.matvec_prefetch = v.get<int>();
       },
       [](const Tuning& t) { return json(t.matvec_prefetch); }},
      {"matvec_native_dot", "a list of \"avx512_vnni\", \"avx2\"",
       "the forms of the CPU's own 8-bit dot in which decode products of matvec_native_types may run "
       "(native_dot.cl), where the device has that form",
       Judge::Decode, {json::array(), {"avx512_vnni"}, {"avx512_vnni", "avx2"}},
       [](Tuning& t, const json& v, const DeviceInfo&) {
         t.matvec_native_dot = list_of("matvec_native_dot", v, {"avx512_vnni", "avx2"}, "native dot forms");
       },
       [](const Tuning& t) { return json(t.matvec_native_dot); }},
      {"matvec_native_types", "a list of \"Q4_0\", \"Q4_1\", \"Q8_0\"",
       "weight types whose decode products take that native dot", Judge::Decode, kTypeCandidates,
       [](Tuning& t, const json& v, const DeviceInfo&) {
         t.matvec_native_types = list_of("matvec_native_types", v, kIntTypes, "weight types");
       },
       [](const Tuning& t) { return json(t.matvec_native_types); }},
      {"matvec_native_local", "a whole number in [1, 65536]",
       "work-items per group of the native-dot products (each group quantizes the input row once)", Judge::Decode,
       {8, 16, 32, 64},
       [](Tuning& t, const json& v, const DeviceInfo&) {
         t.matvec_native_local = whole("matvec_native_local", v, 1, 65536);
       },
       [](const Tuning& t) { return json(t.matvec_native_local); }},
      {"decode_layer_launch", "true or false",
       "decode runs each transformer block in one launch (decode_layer.cl) where the model and kernels allow it; "
       "else 5 launches a block (6 where decode attention splits)",
       Judge::Decode, kBools,
       [](Tuning& t, const json& v, const DeviceInfo&) { t.decode_layer_launch = flag("decode_layer_launch", v); },
       [](const Tuning& t) { return json(t.decode_layer_launch); }},
      {"norm_local", "a whole number in [1, 65536]", "work-group size of row reductions (RMSNorm)", Judge::Both,
       kGroups,
       [](Tuning& t, const json& v, const DeviceInfo&) { t.norm_local = whole("norm_local", v, 1, 65536); },
       [](const Tuning& t) { return json(t.norm_local); }},
  };
}

void apply_values(Tuning& t, const json& j, const DeviceInfo& dev) {
  if (!j.is_object()) return;
  for (const TuningKey& k : tuning_keys())
    if (j.contains(k.name)) k.read(t, j[k.name], dev);
  if (j.contains("clblast") && j["clblast"].is_object()) t.clblast = j["clblast"];
}

}  // namespace

const std::vector<TuningKey>& tuning_keys() {
  static const std::vector<TuningKey> keys = make_keys();
  return keys;
}

nlohmann::json Tuning::to_json() const {
  json j = {{"vendor", vendor_key}, {"device", device_key}};
  for (const TuningKey& k : tuning_keys()) j[k.name] = k.write(*this);
  return j;
}

Tuning lookup_tuning(const DeviceInfo& dev, const nlohmann::json& overrides) {
  nlohmann::json data = load_data();
  Tuning t;
  const nlohmann::json defaults = data.value("default", nlohmann::json::object());
  for (const TuningKey& k : tuning_keys())
    if (!defaults.contains(k.name))
      throw ClError(std::string("platforms/tuning.json: the top-level 'default' lacks '") + k.name +
                    "' (it is the one source of default tuning values: give every key)");
  apply_values(t, defaults, dev);
  const std::string vendor_text = lower(dev.platform_name + " " + dev.platform_vendor + " " + dev.vendor);
  for (const auto& alias : data.value("vendor_aliases", nlohmann::json::array())) {
    if (alias.size() != 2 || vendor_text.find(alias[1].get<std::string>()) == std::string::npos) continue;
    t.vendor_key = alias[0].get<std::string>();
    break;
  }
  const auto& vendors = data.value("vendors", nlohmann::json::object());
  if (t.vendor_key != "default" && vendors.contains(t.vendor_key)) {
    const auto& v = vendors[t.vendor_key];
    apply_values(t, v.value("default", nlohmann::json::object()), dev);
    const std::string name = lower(dev.name);
    const auto devices = v.value("devices", nlohmann::json::object());
    for (auto it = devices.begin(); it != devices.end(); ++it) {
      if (name.find(lower(it.key())) == std::string::npos) continue;
      t.device_key = it.key();
      apply_values(t, it.value(), dev);
      break;
    }
  }
  apply_values(t, overrides, dev);
  return t;
}

}  // namespace infinipot::cl
