#include "pot/pot_snapshot.h"
#include "model_loader/setting_names.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace infinipot {
namespace {

constexpr char kMagic[8] = {'I', 'P', 'O', 'T', 'S', 'N', 'A', 'P'};
constexpr uint32_t kVersion = 2;      // what serialize writes
constexpr uint32_t kOldestVersion = 1;  // version 1: no layer kinds, no local store (llama only)
constexpr int kMaxLayers = 4096;
constexpr size_t kMaxHeader = 1 << 20;
constexpr int kMaxDim = 1 << 20;

template <typename T>
void put(std::vector<uint8_t>& out, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

template <typename T>
void put_array(std::vector<uint8_t>& out, const std::vector<T>& v) {
  if (v.empty()) return;
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  out.insert(out.end(), p, p + v.size() * sizeof(T));
}

// The sections in file order: name, element size, element count.
struct Section {
  const char* name;
  size_t elem;
  size_t count;
};
std::vector<Section> sections_of(const PotSnapshot& s) {
  return {{"nuc", 4, s.nuc.size()},     {"acc", 4, s.acc.size()},       {"source", 4, s.source.size()},
          {"unit", 4, s.unit.size()},   {"position", 4, s.position.size()}, {"mass", 4, s.mass.size()},
          {"tokens", 4, s.tokens.size()}, {"kv", 1, s.kv.size()}, {"window_kv", 1, s.window_kv.size()}};
}

// Floats whose value may be a sentinel (infinity, NaN) travel as their bits: JSON has no such numbers.
uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

[[noreturn]] void bad(const std::string& what, const std::string& why) {
  throw std::invalid_argument("pot snapshot '" + what + "' " + why +
                              ": it is not a snapshot this program wrote, or it is damaged; save it again with "
                              "`infinipot run ... {save_pot} FILE`");
}

}  // namespace

uint64_t fnv1a64(const uint8_t* data, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; ++i) {
    h ^= data[i];
    h *= 1099511628211ull;
  }
  return h;
}

std::vector<uint8_t> serialize_pot_snapshot(const PotSnapshot& s) {
  nlohmann::json h = {{"model_id", s.model_id},     {"settings", s.settings},     {"n_layer", s.n_layer},
                      {"n_head_kv", s.n_head_kv},   {"head_dim", s.head_dim},     {"capacity", s.capacity},
                      {"half", s.half},             {"size", s.size},             {"next_position", s.next_position},
                      {"pinned", s.pinned},         {"stream_pos", s.stream_pos}, {"last_token", s.last_token},
                      {"last_unit", s.last_unit},   {"pending_nuc_bits", float_bits(s.pending_nuc)}, {"cycles", s.cycles},
                      {"max_position", s.max_position}, {"tokens_read", s.tokens_read},
                      {"kept_total", s.kept_total}, {"kept_least", s.kept_least}, {"kept_most", s.kept_most},
                      {"layer_kinds", s.layer_kinds},
                      {"window", {{"capacity", s.window_capacity}, {"size", s.window_size},
                                  {"next_position", s.window_next_position}}}};
  nlohmann::json secs = nlohmann::json::array();
  for (const auto& sec : sections_of(s)) secs.push_back({{"name", sec.name}, {"count", sec.count}});
  h["sections"] = secs;
  const std::string header = h.dump();
  std::vector<uint8_t> out(kMagic, kMagic + 8);
  put(out, kVersion);
  put(out, uint32_t(0));
  put(out, uint64_t(header.size()));
  out.insert(out.end(), header.begin(), header.end());
  put_array(out, s.nuc);
  put_array(out, s.acc);
  put_array(out, s.source);
  put_array(out, s.unit);
  put_array(out, s.position);
  put_array(out, s.mass);
  put_array(out, s.tokens);
  put_array(out, s.kv);
  put_array(out, s.window_kv);
  put(out, fnv1a64(out.data(), out.size()));
  return out;
}

PotSnapshot parse_pot_snapshot(const uint8_t* data, size_t n, const std::string& what) {
  if (n < 24 + 8) bad(what, "is too short (" + std::to_string(n) + " bytes)");
  if (std::memcmp(data, kMagic, 8) != 0) bad(what, "does not start with IPOTSNAP");
  uint32_t version = 0;
  uint64_t header_len = 0;
  std::memcpy(&version, data + 8, 4);
  std::memcpy(&header_len, data + 16, 8);
  if (version < kOldestVersion || version > kVersion)
    throw std::invalid_argument("pot snapshot '" + what + "' has format version " + std::to_string(version) +
                                "; this program reads versions " + std::to_string(kOldestVersion) + " to " +
                                std::to_string(kVersion) + ": save it again");
  uint64_t stored = 0;
  std::memcpy(&stored, data + n - 8, 8);
  if (fnv1a64(data, n - 8) != stored) bad(what, "fails its checksum (truncated or modified)");
  if (header_len == 0 || header_len > kMaxHeader || header_len > n - 32) bad(what, "has a bad header length");
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(data + 24, data + 24 + header_len);
  } catch (const std::exception& e) {
    bad(what, std::string("has a header that is not JSON (") + e.what() + ")");
  }
  PotSnapshot s;
  auto get_int = [&](const char* k, long long lo, long long hi) -> long long {
    if (!h.contains(k) || !h[k].is_number_integer()) bad(what, std::string("lacks the whole number '") + k + "'");
    const long long v = h[k].get<long long>();
    if (v < lo || v > hi) bad(what, std::string("has '") + k + "' = " + std::to_string(v) + " out of range");
    return v;
  };
  if (!h.contains("model_id") || !h["model_id"].is_string()) bad(what, "lacks the model identity");
  if (!h.contains("settings") || !h["settings"].is_object()) bad(what, "lacks the pot settings");
  if (!h.contains("half") || !h["half"].is_boolean()) bad(what, "lacks 'half'");
  if (!h.contains("pending_nuc_bits") || !h["pending_nuc_bits"].is_number_unsigned() ||
      h["pending_nuc_bits"].get<uint64_t>() > 0xffffffffull)
    bad(what, "lacks 'pending_nuc_bits'");
  s.model_id = h["model_id"];
  s.settings = h["settings"];
  s.half = h["half"];
  s.pending_nuc = bits_float(static_cast<uint32_t>(h["pending_nuc_bits"].get<uint64_t>()));
  s.n_layer = static_cast<int>(get_int("n_layer", 1, kMaxLayers));
  s.n_head_kv = static_cast<int>(get_int("n_head_kv", 1, 4096));
  s.head_dim = static_cast<int>(get_int("head_dim", 1, 4096));
  s.capacity = static_cast<int>(get_int("capacity", 2, kMaxDim * 16));
  s.size = static_cast<int>(get_int("size", 0, s.capacity));
  s.next_position = static_cast<int>(get_int("next_position", 0, 1LL << 40 > INT32_MAX ? INT32_MAX : 1LL << 40));
  s.pinned = static_cast<int>(get_int("pinned", 0, s.size));
  s.stream_pos = static_cast<int>(get_int("stream_pos", 0, INT32_MAX));
  s.last_token = static_cast<int>(get_int("last_token", -1, INT32_MAX));
  s.last_unit = static_cast<int>(get_int("last_unit", -1, INT32_MAX));
  s.cycles = static_cast<int>(get_int("cycles", 0, INT32_MAX));
  s.max_position = static_cast<int>(get_int("max_position", 0, INT32_MAX));
  s.tokens_read = get_int("tokens_read", 0, INT64_MAX);
  if (h.contains("kept_total")) {  // absent in snapshots from before --keep auto
    s.kept_total = get_int("kept_total", 0, INT64_MAX);
    s.kept_least = static_cast<int>(get_int("kept_least", 0, s.capacity));
    s.kept_most = static_cast<int>(get_int("kept_most", 0, s.capacity));
  }
  if (version == 1) {
    s.layer_kinds.assign(s.n_layer, 'G');  // version 1 was written for all-global (llama) models only
  } else {
    if (!h.contains("layer_kinds") || !h["layer_kinds"].is_string()) bad(what, "lacks 'layer_kinds'");
    s.layer_kinds = h["layer_kinds"].get<std::string>();
    if (s.layer_kinds.empty() || s.layer_kinds.size() > size_t(kMaxLayers) ||
        s.layer_kinds.find_first_not_of("GL") != std::string::npos)
      bad(what, "has 'layer_kinds' that is not a string of G (global) and L (sliding-window), one per layer");
    const int globals = static_cast<int>(std::count(s.layer_kinds.begin(), s.layer_kinds.end(), 'G'));
    if (globals != s.n_layer)
      bad(what, "has " + std::to_string(globals) + " global layers in 'layer_kinds' but a pot of " +
                    std::to_string(s.n_layer) + " layers");
    if (!h.contains("window") || !h["window"].is_object()) bad(what, "lacks its sliding-window store ('window')");
    const nlohmann::json& w = h["window"];
    auto get_w = [&](const char* k, long long lo, long long hi) -> int {
      if (!w.contains(k) || !w[k].is_number_integer()) bad(what, std::string("lacks the whole number 'window.") + k + "'");
      const long long v = w[k].get<long long>();
      if (v < lo || v > hi) bad(what, std::string("has 'window.") + k + "' = " + std::to_string(v) + " out of range");
      return static_cast<int>(v);
    };
    // Without local layers the store is absent (all 0); with them, slot == position in it.
    const bool local = s.window_layers() > 0;
    s.window_capacity = get_w("capacity", local ? 1 : 0, local ? kMaxDim * 16 : 0);
    s.window_size = get_w("size", 0, s.window_capacity);
    s.window_next_position = get_w("next_position", s.window_size, s.window_size);
  }
  const unsigned __int128 slots128 = (unsigned __int128)s.n_layer * s.n_head_kv * s.capacity;
  if (slots128 > (1ull << 34)) bad(what, "describes a pot too large to be real");
  const size_t slots = s.slots();
  const unsigned __int128 kv128 = (unsigned __int128)s.n_layer * 2 * s.n_head_kv * s.size * s.head_dim * (s.half ? 2 : 4);
  if (kv128 > n) bad(what, "is shorter than the K/V its header describes");
  const unsigned __int128 window128 =
      (unsigned __int128)s.window_layers() * 2 * s.n_head_kv * s.window_size * s.head_dim * (s.half ? 2 : 4);
  if (window128 > n) bad(what, "is shorter than the sliding-window K/V its header describes");

  // Section sizes: each must match the shape. Version 1 has no window_kv.
  const size_t n_sections = version == 1 ? 8 : 9;
  if (!h.contains("sections") || !h["sections"].is_array() || h["sections"].size() != n_sections)
    bad(what, "lacks its section list");
  const char* names[9] = {"nuc", "acc", "source", "unit", "position", "mass", "tokens", "kv", "window_kv"};
  size_t counts[9] = {};
  for (size_t i = 0; i < n_sections; ++i) {
    const auto& sec = h["sections"][i];
    if (!sec.is_object() || sec.value("name", "") != names[i] || !sec.contains("count") ||
        !sec["count"].is_number_unsigned())
      bad(what, std::string("has a bad entry for section '") + names[i] + "'");
    counts[i] = sec["count"].get<size_t>();
  }
  auto need = [&](int i, size_t want, bool may_be_empty) {
    if (counts[i] != want && !(may_be_empty && counts[i] == 0))
      bad(what, std::string("has ") + std::to_string(counts[i]) + " '" + names[i] + "' values where its shape needs " +
                    std::to_string(want));
  };
  need(0, slots, false);
  need(1, slots, true);
  need(2, slots, false);
  need(3, slots, false);
  need(4, slots, false);
  need(5, slots, true);
  if (counts[6] != size_t(s.stream_pos)) bad(what, "holds a token list that does not match the tokens it read");
  need(7, size_t(kv128), false);
  need(8, size_t(window128), false);
  size_t body = 0;
  for (int i = 0; i < 9; ++i) {
    const size_t elem = i >= 7 ? 1 : 4;
    if (counts[i] > n / elem) bad(what, "is shorter than its sections");
    body += counts[i] * elem;
    if (body > n) bad(what, "is shorter than its sections");
  }
  if (24 + header_len + body + 8 != n)
    bad(what, "has " + std::to_string(n) + " bytes where its header describes " + std::to_string(24 + header_len + body + 8));
  const uint8_t* p = data + 24 + header_len;
  // (memcpy only with a count: an empty vector's data() may be null, and memcpy's pointers
  // must not be, even for zero bytes.)
  auto take_f = [&](std::vector<float>& v, size_t c) {
    v.resize(c);
    if (c) std::memcpy(v.data(), p, c * 4);
    p += c * 4;
  };
  auto take_i = [&](std::vector<int>& v, size_t c) {
    v.resize(c);
    if (c) std::memcpy(v.data(), p, c * 4);
    p += c * 4;
  };
  take_f(s.nuc, counts[0]);
  take_f(s.acc, counts[1]);
  take_i(s.source, counts[2]);
  take_i(s.unit, counts[3]);
  take_i(s.position, counts[4]);
  take_f(s.mass, counts[5]);
  take_i(s.tokens, counts[6]);
  s.kv.assign(p, p + counts[7]);
  p += counts[7];
  s.window_kv.assign(p, p + counts[8]);
  // Slots in use must point into the stream and positions before next_position.
  for (int l = 0; l < s.n_layer; ++l)
    for (int hh = 0; hh < s.n_head_kv; ++hh)
      for (int j = 0; j < s.size; ++j) {
        const size_t i = (size_t(l) * s.n_head_kv + hh) * s.capacity + j;
        if (s.source[i] < 0 || s.source[i] >= s.stream_pos || s.position[i] < 0 || s.position[i] >= s.next_position ||
            s.unit[i] < 0 || s.unit[i] > s.source[i])
          bad(what, "has a slot pointing outside the text it read");
      }
  return s;
}

void write_pot_snapshot(const std::string& path, const PotSnapshot& s) {
  const std::vector<uint8_t> bytes = serialize_pot_snapshot(s);
  // Written beside the target and renamed: a failed write never leaves half a snapshot.
  const std::string tmp = path + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw SettingError("save_pot", "", "", "{save_pot}: cannot write '" + path + "' (missing directory or no permission)");
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      throw std::runtime_error("{save_pot}: writing '" + path + "' failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("{save_pot}: cannot rename the snapshot into '" + path + "'");
  }
}

PotSnapshot read_pot_snapshot(const std::string& path) {
  if (std::filesystem::is_directory(path))
    throw SettingError("load_pot", "", "", "{load_pot}: '" + path + "' is a directory; give the snapshot file {save_pot} wrote");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw SettingError("load_pot", "", "", "{load_pot}: cannot read '" + path + "' (no such file or no permission)");
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_pot_snapshot(bytes.data(), bytes.size(), path);
}

}  // namespace infinipot
