// The C API's handles and error mapping (include/infinipot.h), shared by its two files:
// infinipot_c.cpp (errors, models, options, stats) and capi_session.cpp (sessions).
#pragma once
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/conversation.h"
#include "engine/engine.h"
#include "engine/pot_plan.h"
#include "infinipot.h"
#include "model_loader/setting_names.h"

struct infinipot_model {
  std::unique_ptr<infinipot::Engine> engine;
  std::string prepared;                 // the plan the device is prepared for ("": none, or a full cache)
  infinipot_session* active = nullptr;  // the session whose state the device's pot holds, if any
  int sessions = 0;
  bool freed = false;                   // infinipot_model_free came while sessions were left
};

struct infinipot_session {
  infinipot_model* model = nullptr;
  // Settings.
  int pot = 0, keep = 0, reserve = 128;
  std::string policy, catalyst, system;
  std::shared_ptr<const infinipot::PotPlan> plan;  // with a pot: the device plan every step runs on
  std::string plan_key;                            // what the device must be prepared for
  infinipot::SamplerOptions sampler;
  infinipot_progress_callback progress = nullptr;
  void* progress_user = nullptr;
  // The document while it is read (pot). stream: every token fed (chat prefix first; the
  // last one may be the engine's held-back token).
  std::vector<infinipot::TokenId> stream;
  std::string pending;        // fed bytes not yet read (the pot reads complete words only)
  bool reading_begun = false, fed = false;
  uint64_t on_stream = 0;     // Engine::stream_id() while the device holds the reading
  std::shared_ptr<const infinipot::PotSnapshot> reading;  // the reading, parked in host memory
  infinipot::TokenId reading_held = -1;
  // Once the document ends (the first ask, chat, save): its pot, asked from and chatted after.
  bool closed = false;
  std::shared_ptr<const infinipot::PotSnapshot> document;  // null: no document was fed
  infinipot::Conversation chat;
  std::string broken;         // why the conversation cannot go on ("" while it can)
  std::string text;           // without a pot: the whole document, read by each ask
  // Figures.
  long long read_tokens = 0;  // tokens evaluated while reading and prefilling, and their time
  double read_s = 0;
  infinipot_stats stats{};
};

namespace infinipot::capi {

// The progress callback said stop.
struct Cancelled {
  std::string message;
};
// A file could not be read or written (INFINIPOT_ERR_IO).
struct IoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs f and maps whatever it throws to a status and infinipot_last_error()'s message, worded
// in the C API's fields.
infinipot_status guarded(const std::function<void()>& f);
void require(bool ok, const std::string& message);
// The same for one option (a setting id, model_loader/setting_names.h): infinipot_last_error_setting names it.
void require(bool ok, const std::string& setting, const std::string& message);
// How the C API names the settings lower layers name as {id} (model_loader/setting_names.h).
const SettingNames& c_names();
size_t bad_utf8_at(const std::string& s);  // offset of the first invalid UTF-8 sequence, or npos

}  // namespace infinipot::capi
