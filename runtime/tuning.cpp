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

void apply_values(Tuning& t, const nlohmann::json& j, const DeviceInfo& dev) {
  if (!j.is_object()) return;
  if (j.contains("gemm_tile_rows")) {
    const auto& v = j["gemm_tile_rows"];
    if (v == "auto") t.gemm_tile_rows = dev.native_float_width >= 16 ? 8 : dev.native_float_width == 8 ? 6 : 4;
    else if (v == 4 || v == 6 || v == 8) t.gemm_tile_rows = v.get<int>();
    else
      throw ClError("platforms/tuning.json: 'gemm_tile_rows' must be 4, 6, 8 or \"auto\", got " + v.dump());
  }
  if (j.contains("attention_vec16_rows")) {
    const auto& v = j["attention_vec16_rows"];
    if (v == "auto") t.attention_vec16_rows = 0;
    else if (v == 4 || v == 8 || v == 16) t.attention_vec16_rows = v.get<int>();
    else
      throw ClError("platforms/tuning.json: 'attention_vec16_rows' must be 4, 8, 16 (rows per work-item, one per "
                    "vector lane) or \"auto\", got " +
                    v.dump());
  }
  for (const char* k : {"matvec_local", "matvec_native_local", "norm_local", "attention_tile_rows", "attention_key_tile",
                        "attention_decode_split", "prefill_chunk"})
    if (j.contains(k) && (!j[k].is_number_integer() || j[k].get<long long>() < 1 || j[k].get<long long>() > 65536))
      throw ClError(std::string("platforms/tuning.json: '") + k + "' must be a whole number in [1, 65536], got " +
                    j[k].dump());
  for (const char* k : {"matvec_int8", "matvec_native_types", "gemm_native_types"})
    if (j.contains(k)) {
      bool ok = j[k].is_array();
      for (const auto& v : ok ? j[k] : nlohmann::json::array())
        ok = ok && v.is_string() && (v == "Q4_0" || v == "Q4_1" || v == "Q8_0");
      if (!ok)
        throw ClError(std::string("platforms/tuning.json: '") + k +
                      "' must be a list of weight types among \"Q4_0\", \"Q4_1\", \"Q8_0\", got " + j[k].dump());
    }
  if (j.contains("matvec_prefetch") &&
      (!j["matvec_prefetch"].is_number_integer() || j["matvec_prefetch"].get<long long>() < 0 ||
       j["matvec_prefetch"].get<long long>() > 65536 || j["matvec_prefetch"].get<long long>() % 64 != 0))
    throw ClError("platforms/tuning.json: 'matvec_prefetch' must be 0 (none) or bytes ahead, a multiple of 64 up to "
                  "65536, got " + j["matvec_prefetch"].dump());
  if (j.contains("matvec_native_dot")) {
    bool ok = j["matvec_native_dot"].is_array();
    for (const auto& v : ok ? j["matvec_native_dot"] : nlohmann::json::array())
      ok = ok && v.is_string() && (v == "avx512_vnni" || v == "avx2");
    if (!ok)
      throw ClError("platforms/tuning.json: 'matvec_native_dot' must be a list of native dot forms among "
                    "\"avx512_vnni\", \"avx2\", got " + j["matvec_native_dot"].dump());
  }
  for (const char* k : {"matvec_fusion", "matvec_norm_fusion", "attention_vec16", "decode_layer_launch"})
    if (j.contains(k) && !j[k].is_boolean())
      throw ClError(std::string("platforms/tuning.json: '") + k + "' must be true or false, got " + j[k].dump());
  t.gemm_backend = j.value("gemm_backend", t.gemm_backend);
  t.matvec_fusion = j.value("matvec_fusion", t.matvec_fusion);
  t.matvec_norm_fusion = j.value("matvec_norm_fusion", t.matvec_norm_fusion);
  t.decode_layer_launch = j.value("decode_layer_launch", t.decode_layer_launch);
  if (j.contains("matvec_int8")) t.matvec_int8 = j["matvec_int8"].get<std::vector<std::string>>();
  t.matvec_local = j.value("matvec_local", t.matvec_local);
  t.matvec_prefetch = j.value("matvec_prefetch", t.matvec_prefetch);
  if (j.contains("matvec_native_dot")) t.matvec_native_dot = j["matvec_native_dot"].get<std::vector<std::string>>();
  if (j.contains("matvec_native_types"))
    t.matvec_native_types = j["matvec_native_types"].get<std::vector<std::string>>();
  t.matvec_native_local = j.value("matvec_native_local", t.matvec_native_local);
  if (j.contains("gemm_native_types")) t.gemm_native_types = j["gemm_native_types"].get<std::vector<std::string>>();
  t.norm_local = j.value("norm_local", t.norm_local);
  t.attention_tile_rows = j.value("attention_tile_rows", t.attention_tile_rows);
  t.attention_key_tile = j.value("attention_key_tile", t.attention_key_tile);
  t.attention_vec16 = j.value("attention_vec16", t.attention_vec16);
  t.attention_decode_split = j.value("attention_decode_split", t.attention_decode_split);
  t.prefill_chunk = j.value("prefill_chunk", t.prefill_chunk);
  if (j.contains("clblast") && j["clblast"].is_object()) t.clblast = j["clblast"];
}

}  // namespace

const char* const kTuningKeys[19] = {"gemm_backend",         "gemm_tile_rows",     "gemm_native_types",  "prefill_chunk",
                                     "attention_vec16",      "attention_vec16_rows", "attention_tile_rows",
                                     "attention_key_tile",   "attention_decode_split", "matvec_int8",
                                     "matvec_fusion",        "matvec_norm_fusion", "matvec_local",
                                     "matvec_prefetch",      "matvec_native_dot",  "matvec_native_types",
                                     "matvec_native_local",  "decode_layer_launch", "norm_local"};

nlohmann::json Tuning::to_json() const {
  return {{"vendor", vendor_key}, {"device", device_key}, {"gemm_backend", gemm_backend}, {"gemm_tile_rows", gemm_tile_rows},
          {"gemm_native_types", gemm_native_types},
          {"matvec_int8", matvec_int8}, {"matvec_fusion", matvec_fusion}, {"matvec_norm_fusion", matvec_norm_fusion}, {"matvec_local", matvec_local}, {"matvec_prefetch", matvec_prefetch},
          {"matvec_native_dot", matvec_native_dot}, {"matvec_native_types", matvec_native_types},
          {"matvec_native_local", matvec_native_local},
          {"decode_layer_launch", decode_layer_launch},
          {"norm_local", norm_local},
          {"attention_tile_rows", attention_tile_rows}, {"attention_key_tile", attention_key_tile}, {"attention_vec16", attention_vec16},
          {"attention_vec16_rows", attention_vec16_rows > 0 ? nlohmann::json(attention_vec16_rows) : nlohmann::json("auto")},
          {"attention_decode_split", attention_decode_split},
          {"prefill_chunk", prefill_chunk}};
}

Tuning lookup_tuning(const DeviceInfo& dev, const nlohmann::json& overrides) {
  nlohmann::json data = load_data();
  Tuning t;
  const nlohmann::json defaults = data.value("default", nlohmann::json::object());
  for (const char* k : kTuningKeys)
    if (!defaults.contains(k))
      throw ClError(std::string("platforms/tuning.json: the top-level 'default' lacks '") + k +
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
  if (t.gemm_backend != "packed" && t.gemm_backend != "clblast")
    throw ClError("platforms/tuning.json: gemm_backend '" + t.gemm_backend + "' is neither 'packed' nor 'clblast'");
  return t;
}

}  // namespace infinipot::cl
