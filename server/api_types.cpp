#include "server/api_types.h"

#include <cmath>

namespace infinipot::server {

using nlohmann::json;

json ApiError::body() const {
  json e = {{"message", what()}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}};
  return {{"error", e}};
}

ApiError bad_request(const std::string& message, const std::string& param, const std::string& code) {
  return ApiError(400, "invalid_request_error", code, message, param);
}

namespace {

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    default: return "something else";
  }
}

[[noreturn]] void wrong_type(const std::string& field, const char* want, const json& got) {
  throw bad_request("'" + field + "' must be " + want + ", got " + type_name(got), field, "invalid_type");
}

// A field that may be absent or null (then `fallback`).
template <typename F>
void optional_field(const json& j, const char* name, F&& read) {
  auto it = j.find(name);
  if (it == j.end() || it->is_null()) return;
  read(*it);
}

int integer(const json& v, const std::string& field, long long lo, long long hi) {
  if (!v.is_number_integer() && !(v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))
    wrong_type(field, "an integer", v);
  const double d = v.get<double>();
  if (d < lo || d > hi)
    throw bad_request("'" + field + "' must lie in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                          v.dump(),
                      field);
  return static_cast<int>(d);
}

double number(const json& v, const std::string& field, double lo, double hi) {
  if (!v.is_number()) wrong_type(field, "a number", v);
  const double d = v.get<double>();
  if (!(d >= lo && d <= hi))
    throw bad_request("'" + field + "' must lie in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                          v.dump(),
                      field);
  return d;
}

std::string string_field(const json& v, const std::string& field) {
  if (!v.is_string()) wrong_type(field, "a string", v);
  return v.get<std::string>();
}

// OpenAI message content: a string, or an array of {"type": "text", "text": ...} parts.
std::string content_text(const json& v, const std::string& field) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  if (!v.is_array()) wrong_type(field, "a string or an array of text parts", v);
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& part = v[i];
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!part.is_object()) wrong_type(at, "an object", part);
    const std::string type = part.value("type", "");
    if (type != "text")
      throw bad_request("'" + at + ".type' must be \"text\" (this server reads text only), got \"" + type + "\"", at + ".type");
    if (!part.contains("text")) throw bad_request("'" + at + ".text' is missing", at + ".text");
    out += string_field(part["text"], at + ".text");
  }
  return out;
}

Sampling parse_sampling(const json& j) {
  Sampling s;
  optional_field(j, "max_tokens", [&](const json& v) { s.max_tokens = integer(v, "max_tokens", 1, 1 << 20); });
  optional_field(j, "max_completion_tokens",
                 [&](const json& v) { s.max_tokens = integer(v, "max_completion_tokens", 1, 1 << 20); });
  optional_field(j, "temperature", [&](const json& v) { s.sampler.temperature = static_cast<float>(number(v, "temperature", 0, 2)); });
  optional_field(j, "top_p", [&](const json& v) { s.sampler.top_p = static_cast<float>(number(v, "top_p", 0, 1)); });
  if (s.sampler.top_p <= 0) s.sampler.top_p = 1e-6f;  // top_p 0: the most likely token only
  optional_field(j, "seed", [&](const json& v) {
    if (!v.is_number_integer()) wrong_type("seed", "an integer", v);
    s.sampler.seed = static_cast<uint64_t>(v.get<long long>());
  });
  optional_field(j, "stop", [&](const json& v) {
    if (v.is_string()) {
      s.stop.push_back(v.get<std::string>());
    } else if (v.is_array()) {
      if (v.size() > 4) throw bad_request("'stop' takes at most 4 sequences, got " + std::to_string(v.size()), "stop");
      for (size_t i = 0; i < v.size(); ++i) s.stop.push_back(string_field(v[i], "stop[" + std::to_string(i) + "]"));
    } else {
      wrong_type("stop", "a string or an array of strings", v);
    }
    for (const std::string& t : s.stop)
      if (t.empty()) throw bad_request("'stop' sequences must not be empty", "stop");
  });
  optional_field(j, "stream", [&](const json& v) {
    if (!v.is_boolean()) wrong_type("stream", "a boolean", v);
    s.stream = v.get<bool>();
  });
  optional_field(j, "stream_options", [&](const json& v) {
    if (!v.is_object()) wrong_type("stream_options", "an object", v);
    optional_field(v, "include_usage", [&](const json& u) {
      if (!u.is_boolean()) wrong_type("stream_options.include_usage", "a boolean", u);
      s.include_usage = u.get<bool>();
    });
  });
  optional_field(j, "n", [&](const json& v) {
    if (integer(v, "n", 1, 128) != 1) throw bad_request("'n' must be 1: this server answers with one choice", "n");
  });
  return s;
}

std::string model_field(const json& j) {
  if (!j.contains("model")) throw bad_request("'model' is missing", "model", "missing_field");
  return string_field(j["model"], "model");
}

}  // namespace

json parse_json_body(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    throw bad_request("the request body is not valid JSON", "", "invalid_json");
  if (!j.is_object()) throw bad_request(std::string("the request body must be a JSON object, got ") + type_name(j), "", "invalid_json");
  return j;
}

ChatRequest parse_chat_request(const json& j) {
  ChatRequest r;
  r.model = model_field(j);
  if (!j.contains("messages")) throw bad_request("'messages' is missing", "messages", "missing_field");
  const json& m = j["messages"];
  if (!m.is_array()) wrong_type("messages", "an array", m);
  if (m.empty()) throw bad_request("'messages' is empty: a chat needs at least one user message", "messages");
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m[i].is_object()) wrong_type(at, "an object", m[i]);
    if (!m[i].contains("role")) throw bad_request("'" + at + ".role' is missing", at + ".role", "missing_field");
    ChatMessage msg;
    msg.role = string_field(m[i]["role"], at + ".role");
    if (msg.role == "developer") msg.role = "system";  // OpenAI's newer name for it
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant")
      throw bad_request("'" + at + ".role' must be \"system\", \"user\" or \"assistant\", got \"" + msg.role + "\"",
                        at + ".role");
    if (!m[i].contains("content") && msg.role != "assistant")
      throw bad_request("'" + at + ".content' is missing", at + ".content", "missing_field");
    msg.content = m[i].contains("content") ? content_text(m[i]["content"], at + ".content") : "";
    r.messages.push_back(std::move(msg));
  }
  r.sampling = parse_sampling(j);
  optional_field(j, "document", [&](const json& v) { r.document = string_field(v, "document"); });
  return r;
}

CompletionRequest parse_completion_request(const json& j) {
  CompletionRequest r;
  r.model = model_field(j);
  if (!j.contains("prompt")) throw bad_request("'prompt' is missing", "prompt", "missing_field");
  const json& p = j["prompt"];
  if (p.is_string()) {
    r.prompt = p.get<std::string>();
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    r.prompt = p[0].get<std::string>();
  } else {
    wrong_type("prompt", "a string (or an array of one string)", p);
  }
  if (r.prompt.empty()) throw bad_request("'prompt' is empty", "prompt");
  r.sampling = parse_sampling(j);
  return r;
}

DocumentRequest parse_document_request(const std::string& body, const std::string& content_type) {
  DocumentRequest d;
  if (content_type.rfind("text/plain", 0) == 0) {
    d.text = body;
  } else {
    const json j = parse_json_body(body);
    if (!j.contains("text")) throw bad_request("'text' is missing (or send the document as text/plain)", "text", "missing_field");
    d.text = string_field(j["text"], "text");
    optional_field(j, "system", [&](const json& v) { d.system = string_field(v, "system"); });
  }
  if (d.text.find_first_not_of(" \t\r\n") == std::string::npos) throw bad_request("the document is empty", "text");
  return d;
}

}  // namespace infinipot::server
