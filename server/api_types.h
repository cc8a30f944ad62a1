// The OpenAI-compatible requests the server takes, parsed and checked before they are queued,
// and the error every refusal answers with: OpenAI's shape, {"error": {"message", "type",
// "param", "code"}}, with its status, so the official clients raise what they raise for OpenAI.
#pragma once
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "model_loader/chat_template.h"
#include "runtime/sampling.h"

namespace infinipot::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, std::string code, const std::string& message, std::string param = "")
      : std::runtime_error(message), status(status), type(std::move(type)), code(std::move(code)), param(std::move(param)) {}
  int status;
  std::string type;   // invalid_request_error, authentication_error, not_found_error, server_error, ...
  std::string code;   // machine-readable: "invalid_json", "context_length_exceeded", ...
  std::string param;  // the request field at fault ("" when none)
  nlohmann::json body() const;
};

ApiError bad_request(const std::string& message, const std::string& param = "", const std::string& code = "invalid_value");

// What a chat or completion asks of the answer.
struct Sampling {
  int max_tokens = 0;  // 0: not given (the server's default)
  SamplerOptions sampler;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

struct ChatRequest {
  std::string model;
  std::vector<ChatMessage> messages;
  Sampling sampling;
  std::string document;  // extension: answer from this document's pot ("" none)
};

struct CompletionRequest {
  std::string model;
  std::string prompt;
  Sampling sampling;
};

struct DocumentRequest {
  std::string text;
  std::string system;  // the chat prefix it is read after ("" the template's own)
};

// Each throws ApiError (400) naming the field at fault.
nlohmann::json parse_json_body(const std::string& body);
ChatRequest parse_chat_request(const nlohmann::json& j);
CompletionRequest parse_completion_request(const nlohmann::json& j);
DocumentRequest parse_document_request(const std::string& body, const std::string& content_type);

}  // namespace infinipot::server
