// Errors below the front-ends name the settings a user can change as {id} placeholders
// ("{pot} 64 cannot hold the chat prefix"), never as one front-end's flag: the CLI says
// --pot, the C API infinipot_session_options.pot, the server its flag or the request's field.
// Each front-end words a message once, where it reports it (worded). The ids are the CLI's
// long flags with '_' for '-' ({device_mem}, {kv_type}, {save_pot}) and {n_predict} for the
// answer's length. Braces around anything else ({key} in a needle) are left as they are.
//
// A refused setting is a SettingError: beside the message it carries which setting (its id),
// what it was (have) and what would work (need), so a front-end can point at the field
// (the server's OpenAI `param`, the C API's infinipot_last_error_setting) without parsing text.
#pragma once
#include <map>
#include <stdexcept>
#include <vector>
#include <string>

namespace infinipot {

// A setting that cannot work. `what()` is the message with {id} placeholders (word it with
// worded()); setting() is the id at fault, have() the value given, need() what would work
// ("in (0, 1]", ">= 66", "<= 1023"), each "" when it does not apply.
class SettingError : public std::invalid_argument {
 public:
  SettingError(std::string setting, std::string have, std::string need, const std::string& message)
      : std::invalid_argument(message), setting_(std::move(setting)), have_(std::move(have)), need_(std::move(need)) {}
  const std::string& setting() const { return setting_; }
  const std::string& have() const { return have_; }
  const std::string& need() const { return need_; }

 private:
  std::string setting_, have_, need_;
};

using SettingNames = std::map<std::string, std::string>;  // id -> the front-end's name for it

// The message with every {id} that `names` knows replaced by its name; an id it does not know
// keeps its braces' content as a plain word ("{pot}" -> "pot") when it is a known setting id.
std::string worded(const std::string& message, const SettingNames& names);

// Every id a lower layer uses (so each front-end's table can be checked to name them all).
const std::vector<std::string>& setting_ids();

}  // namespace infinipot
