// Errors below the front-ends name the settings a user can change as {id} placeholders
// ("{pot} 64 cannot hold the chat prefix"), never as one front-end's flag: the CLI says
// --pot, the C API infinipot_session_options.pot, the server its flag or the request's field.
// Each front-end words a message once, where it reports it (worded). The ids are the CLI's
// long flags with '_' for '-' ({device_mem}, {kv_type}, {save_pot}) and {n_predict} for the
// answer's length. Braces around anything else ({key} in a needle) are left as they are.
#pragma once
#include <map>
#include <vector>
#include <string>

namespace infinipot {

using SettingNames = std::map<std::string, std::string>;  // id -> the front-end's name for it

// The message with every {id} that `names` knows replaced by its name; an id it does not know
// keeps its braces' content as a plain word ("{pot}" -> "pot") when it is a known setting id.
std::string worded(const std::string& message, const SettingNames& names);

// Every id a lower layer uses (so each front-end's table can be checked to name them all).
const std::vector<std::string>& setting_ids();

}  // namespace infinipot
