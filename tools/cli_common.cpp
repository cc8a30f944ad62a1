#include "tools/cli_common.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "build_id.h"  // generated: INFINIPOT_BUILD_ID
#include "pot/policy_spec.h"
#include "runtime/device_memory.h"

namespace infinipot::cli {

const char* build_id() { return INFINIPOT_BUILD_ID; }

std::string data_path(const std::string& rel) {
  std::error_code ec;
  if (std::filesystem::exists(rel, ec)) return rel;
  const std::string in_tree = std::string(INFINIPOT_SOURCE_DIR) + "/" + rel;
  return std::filesystem::exists(in_tree, ec) ? in_tree : rel;
}

std::string read_text_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) throw std::invalid_argument(what + " '" + path + "' does not exist");
  if (S_ISDIR(st.st_mode)) throw std::invalid_argument(what + " '" + path + "' is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(what + " '" + path + "' cannot be read (permissions?)");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void require_utf8(const std::string& s, const std::string& what) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; ok && k < n; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      ok = (cc & 0xC0) == 0x80;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Reject overlong forms, surrogates and code points past U+10FFFF.
    if (ok) ok = !(n == 2 && cp < 0x80) && !(n == 3 && cp < 0x800) && !(n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) &&
                 !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok)
      throw std::invalid_argument(what + " is not valid UTF-8 (first bad byte at offset " + std::to_string(i) +
                                  "); convert it first, e.g. `iconv -f latin1 -t utf-8`");
    i += n;
  }
}

const SettingNames& setting_names() {
  static const SettingNames names = [] {
    SettingNames n;
    for (const std::string& id : setting_ids()) {
      std::string flag = "--" + id;
      std::replace(flag.begin(), flag.end(), '_', '-');
      n[id] = flag;
    }
    n["n_predict"] = "-n";
    return n;
  }();
  return names;
}

std::string worded(const std::exception& e) { return infinipot::worded(e.what(), setting_names()); }

CLI::Validator byte_size_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        try {
          cl::parse_byte_size(s);
          return "";
        } catch (const std::exception& e) {
          return worded(e);
        }
      },
      "SIZE", "byte size");
}

EngineOptions engine_options(const std::string& model, const std::string& device, const std::string& device_mem,
                             int chunk, const std::string& kv_type) {
  EngineOptions eo;
  eo.model_path = model;
  eo.device = device;
  eo.device_mem = device_mem.empty() ? 0 : cl::parse_byte_size(device_mem);
  eo.chunk = chunk;
  eo.kv_type = kv_type;
  return eo;
}

CLI::Option* add_keep_option(CLI::App* sub, int* keep, const std::string& help) {
  return sub
      ->add_option_function<std::string>(
          "--keep",
          [keep](const std::string& v) {
            if (v == "auto") {
              *keep = kKeepAuto;
              return;
            }
            long long n = 0;
            const bool digits = !v.empty() && v.size() <= 9 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
            if (digits) n = std::stoll(v);
            if (!digits || n < 1 || n > (1 << 24))
              throw CLI::ValidationError("--keep", "takes a count of entries in 1..16777216 or auto, got '" + v + "'");
            *keep = static_cast<int>(n);
          },
          help + "; auto: each distillation keeps what its scores justify, a quarter to three quarters of the pot")
      ->type_name("N|auto");
}

}  // namespace infinipot::cli
