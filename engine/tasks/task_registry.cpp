#include "engine/tasks/task_registry.h"
#include "model_loader/setting_names.h"

#include <stdexcept>

namespace infinipot::nih {

const char* const kDefaultTask = "passkey";

const std::vector<std::unique_ptr<const Task>>& tasks() {
  static const std::vector<std::unique_ptr<const Task>> table = [] {
    std::vector<std::unique_ptr<const Task>> t;
    t.push_back(make_passkey_task());
    t.push_back(make_niah_single_task());
    t.push_back(make_niah_uuid_task());
    t.push_back(make_niah_multikey_task());
    t.push_back(make_niah_multivalue_task());
    t.push_back(make_niah_multiquery_task());
    t.push_back(make_vt_task());
    t.push_back(make_cwe_task());
    return t;
  }();
  return table;
}

std::string task_names(const char* separator) {
  std::string out;
  for (const auto& t : tasks()) out += (out.empty() ? "" : separator) + std::string(t->name());
  return out;
}

const Task* task_or_null(const std::string& name) {
  for (const auto& t : tasks())
    if (name == t->name()) return t.get();
  return nullptr;
}

const Task& find_task(const std::string& name) {
  if (const Task* t = task_or_null(name)) return *t;
  throw SettingError("task", name, task_names(), "{task} must be one of " + task_names() + "; got '" + name + "'");
}

}  // namespace infinipot::nih
