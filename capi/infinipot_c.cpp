// The C API (include/infinipot.h): errors, models, options and stats. Sessions are in
// capi_session.cpp. Every entry point catches everything and maps it to a status + message.
#include <exception>
#include <new>
#include <string>

#include "capi/capi_internal.h"
#include "model_loader/chat_template.h"
#include "model_loader/gguf.h"
#include "model_loader/setting_names.h"
#include "runtime/cl_error.h"
#include "runtime/device_memory.h"

namespace infinipot::capi {

namespace {
thread_local std::string g_error;
thread_local std::string g_error_setting;
}  // namespace

const SettingNames& c_names() {
  static const SettingNames names = {
      {"device", "infinipot_model_options.device"},
      {"device_mem", "infinipot_model_options.device_mem"},
      {"kv_type", "infinipot_model_options.kv_type"},
      {"chunk", "infinipot_model_options.chunk"},
      {"pot", "infinipot_session_options.pot"},
      {"keep", "infinipot_session_options.keep"},
      {"policy", "infinipot_session_options.policy"},
      {"catalyst", "infinipot_session_options.catalyst"},
      {"system", "infinipot_session_options.system"},
      {"n_predict", "n_predict"},
      {"temp", "infinipot_sampling.temperature"},
      {"top_p", "infinipot_sampling.top_p"},
      {"save_pot", "infinipot_session_save"},
      {"load_pot", "infinipot_session_load"},
      {"ctx", "the full KV cache (infinipot_session_options.pot 0)"},
      {"raw", "plain-text prompting (not in the C API: use a model with a chat template)"},
      {"nuc_ratio", "the policy's nuc_ratio (infinipot_session_options.policy \"infinipot:nuc_ratio=R\")"},
      {"reserve", "infinipot_session_options.reserve"},
      {"top_k", "infinipot_sampling.top_k"},
  };
  return names;
}

namespace {

// The field a setting id is in: its name where that is a field, else the field that holds it.
std::string c_field(const std::string& id) {
  if (id == "ctx") return "infinipot_session_options.pot";
  if (id == "nuc_ratio") return "infinipot_session_options.policy";
  const auto named = c_names().find(id);
  if (named == c_names().end() || named->second.find(' ') != std::string::npos) return "";
  return named->second;
}

infinipot_status fail(infinipot_status status, const std::string& message, const std::string& setting = "") {
  g_error = worded(message, c_names());
  g_error_setting = setting.empty() ? "" : c_field(setting);
  return status;
}

}  // namespace

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument(message);
}

void require(bool ok, const std::string& setting, const std::string& message) {
  if (!ok) throw SettingError(setting, "", "", message);
}

size_t bad_utf8_at(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return i;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return i;
    i += n;
  }
  return std::string::npos;
}

infinipot_status guarded(const std::function<void()>& f) {
  try {
    f();
    g_error.clear();
    g_error_setting.clear();
    return INFINIPOT_OK;
  } catch (const Cancelled& e) {
    return fail(INFINIPOT_CANCELLED, e.message);
  } catch (const IoError& e) {
    return fail(INFINIPOT_ERR_IO, e.what());
  } catch (const cl::BudgetError& e) {
    return fail(INFINIPOT_ERR_BUDGET,
                std::string(e.what()) + " (in bytes: {device_mem} >= " + std::to_string(e.minimum_bytes()) + ")",
                "device_mem");
  } catch (const gguf::GgufError& e) {
    return fail(INFINIPOT_ERR_MODEL, e.what());
  } catch (const cl::ClError& e) {
    return fail(INFINIPOT_ERR_DEVICE, e.what());
  } catch (const ChatTemplateError& e) {
    return fail(INFINIPOT_ERR_INVALID_ARGUMENT, e.what());
  } catch (const SettingError& e) {
    return fail(INFINIPOT_ERR_INVALID_ARGUMENT, e.what(), e.setting());
  } catch (const std::invalid_argument& e) {
    return fail(INFINIPOT_ERR_INVALID_ARGUMENT, e.what());
  } catch (const std::bad_alloc&) {
    return fail(INFINIPOT_ERR_INTERNAL, "out of host memory");
  } catch (const std::exception& e) {
    return fail(INFINIPOT_ERR_INTERNAL, e.what());
  } catch (...) {
    return fail(INFINIPOT_ERR_INTERNAL, "unknown error");
  }
}

}  // namespace infinipot::capi

using infinipot::capi::guarded;
using infinipot::capi::require;

extern "C" {

const char* infinipot_last_error(void) { return infinipot::capi::g_error.c_str(); }

const char* infinipot_last_error_setting(void) { return infinipot::capi::g_error_setting.c_str(); }

const char* infinipot_status_name(infinipot_status status) {
  switch (status) {
    case INFINIPOT_OK: return "INFINIPOT_OK";
    case INFINIPOT_ERR_INVALID_ARGUMENT: return "INFINIPOT_ERR_INVALID_ARGUMENT";
    case INFINIPOT_ERR_MODEL: return "INFINIPOT_ERR_MODEL";
    case INFINIPOT_ERR_BUDGET: return "INFINIPOT_ERR_BUDGET";
    case INFINIPOT_ERR_DEVICE: return "INFINIPOT_ERR_DEVICE";
    case INFINIPOT_ERR_IO: return "INFINIPOT_ERR_IO";
    case INFINIPOT_ERR_INTERNAL: return "INFINIPOT_ERR_INTERNAL";
    case INFINIPOT_CANCELLED: return "INFINIPOT_CANCELLED";
  }
  return "INFINIPOT_ERR_UNKNOWN";
}

void infinipot_model_options_init(infinipot_model_options* o) {
  if (!o) return;
  o->device = nullptr;
  o->device_mem = 0;
  o->kv_type = nullptr;
  o->chunk = 0;
}

infinipot_status infinipot_model_open(const char* path, const infinipot_model_options* options,
                                      infinipot_model** out) {
  if (out) *out = nullptr;
  return guarded([&] {
    require(path && *path, "infinipot_model_open: path is NULL or empty");
    require(out != nullptr, "infinipot_model_open: out is NULL");
    infinipot::EngineOptions eo;
    eo.model_path = path;
    if (options) {
      if (options->device) eo.device = options->device;
      eo.device_mem = options->device_mem;
      if (options->kv_type) eo.kv_type = options->kv_type;
      require(options->chunk >= 0, "chunk", "infinipot_model_options.chunk must be >= 0 (0: the device's tuning), got " +
                                       std::to_string(options->chunk));
      eo.chunk = options->chunk;
    }
    require(eo.kv_type == "auto" || eo.kv_type == "f16" || eo.kv_type == "f32", "kv_type",
            "infinipot_model_options.kv_type must be \"auto\", \"f16\" or \"f32\", got \"" + eo.kv_type + "\"");
    auto m = std::make_unique<infinipot_model>();
    m->engine = std::make_unique<infinipot::Engine>(eo);
    *out = m.release();
  });
}

void infinipot_model_free(infinipot_model* model) {
  if (!model) return;
  if (model->sessions > 0) {
    model->freed = true;  // freed with its last session
    return;
  }
  delete model;
}

void infinipot_session_options_init(infinipot_session_options* o) {
  if (!o) return;
  o->pot = 0;
  o->keep = 0;
  o->policy = nullptr;
  o->catalyst = nullptr;
  o->system = nullptr;
  o->reserve = 0;
}

void infinipot_sampling_init(infinipot_sampling* s) {
  if (!s) return;
  s->temperature = 0.0f;
  s->top_p = 1.0f;
  s->top_k = 0;
  s->seed = 0;
}

infinipot_status infinipot_session_stats(const infinipot_session* s, infinipot_stats* out) {
  return guarded([&] {
    require(s != nullptr && out != nullptr, "infinipot_session_stats: session or out is NULL");
    *out = s->stats;
  });
}

}  // extern "C"
