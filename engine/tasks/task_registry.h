// The nih tasks by name: the one place that knows them all. Adding a task is one file in
// engine/tasks/, one line in task_registry.cpp and a test.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/tasks/task.h"

namespace infinipot::nih {

// The task a record without a "task" field belongs to (records written before --task).
extern const char* const kDefaultTask;  // "passkey"

const std::vector<std::unique_ptr<const Task>>& tasks();
// Throws std::invalid_argument naming --task and the known tasks.
const Task& find_task(const std::string& name);
const Task* task_or_null(const std::string& name);
std::string task_names(const char* separator = ", ");

// Factories, one per file.
std::unique_ptr<Task> make_passkey_task();
std::unique_ptr<Task> make_niah_single_task();
std::unique_ptr<Task> make_niah_uuid_task();
std::unique_ptr<Task> make_niah_multikey_task();
std::unique_ptr<Task> make_niah_multivalue_task();
std::unique_ptr<Task> make_niah_multiquery_task();
std::unique_ptr<Task> make_vt_task();
std::unique_ptr<Task> make_cwe_task();

}  // namespace infinipot::nih
