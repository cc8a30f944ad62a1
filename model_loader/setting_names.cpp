#include "model_loader/setting_names.h"

#include <algorithm>
#include <vector>

namespace infinipot {

const std::vector<std::string>& setting_ids() {
  static const std::vector<std::string> ids = {
      "device",  "device_mem", "kv_type",  "chunk",    "round_activations", "pot",        "keep",
      "policy",  "nuc_ratio",  "catalyst", "system",   "raw",               "ctx",        "n_predict",
      "temp",    "top_p",      "save_pot", "load_pot", "pot_oracle",        "task",       "needle",
      "checkpoint_every",      "checkpoint_dir",       "out",      "weights",  "question"};
  return ids;
}

std::string worded(const std::string& message, const SettingNames& names) {
  const std::vector<std::string>& ids = setting_ids();
  std::string out;
  out.reserve(message.size());
  size_t i = 0;
  while (i < message.size()) {
    const size_t open = message.find('{', i);
    if (open == std::string::npos) break;
    const size_t close = message.find('}', open + 1);
    if (close == std::string::npos) break;
    const std::string id = message.substr(open + 1, close - open - 1);
    out.append(message, i, open - i);
    const auto named = names.find(id);
    if (named != names.end()) out += named->second;
    else if (std::find(ids.begin(), ids.end(), id) != ids.end()) out += id;
    else out.append(message, open, close - open + 1);  // not a setting ({key} in a needle)
    i = close + 1;
  }
  out.append(message, i, std::string::npos);
  return out;
}

}  // namespace infinipot
