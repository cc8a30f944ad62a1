#include "engine/trial_checkpoint.h"
#include "model_loader/setting_names.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>

namespace infinipot::nih {

namespace {
// FNV-1a 64: a stable file name for a trial's identity.
std::string hash_hex(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}
}  // namespace

TrialCheckpoint::TrialCheckpoint(std::string dir, const std::string& identity, double every_s)
    : every_s_(every_s), last_(std::chrono::steady_clock::now()) {
  if (dir.empty()) return;
  if (every_s < 0) throw SettingError("checkpoint_every", "", "", "{checkpoint_every} must be >= 0 seconds");
  prepare_dir(dir);
  path_ = (std::filesystem::path(dir) / ("trial-" + hash_hex(identity) + ".pot")).string();
}

void TrialCheckpoint::prepare_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!std::filesystem::is_directory(dir))
    throw SettingError("checkpoint_dir", "", "", "{checkpoint_dir}: cannot create the directory '" + dir + "'" +
                                (ec ? " (" + ec.message() + ")" : ""));
}

std::shared_ptr<const PotSnapshot> TrialCheckpoint::load(std::string* problem) {
  if (!enabled() || !std::filesystem::exists(path_)) return nullptr;
  try {
    return std::make_shared<const PotSnapshot>(read_pot_snapshot(path_));
  } catch (const std::exception& e) {
    if (problem) *problem = e.what();
    remove();
    return nullptr;
  }
}

bool TrialCheckpoint::due() const {
  return enabled() && std::chrono::duration<double>(std::chrono::steady_clock::now() - last_).count() >= every_s_;
}

void TrialCheckpoint::save(const PotSnapshot& snap) {
  if (!enabled()) return;
  write_pot_snapshot(path_, snap);  // written beside it and renamed: never half a file
  last_ = std::chrono::steady_clock::now();
  ++saves_;
}

void TrialCheckpoint::remove() {
  if (!enabled()) return;
  std::error_code ec;
  std::filesystem::remove(path_, ec);
  std::filesystem::remove(path_ + ".partial", ec);
}

}  // namespace infinipot::nih
