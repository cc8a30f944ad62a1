// What GET /metrics reports, in Prometheus' text format: requests by endpoint and status,
// tokens, prefill and decode speed, distillations, device bytes by category, queue depth,
// conversations and documents held. Counters are updated from any thread.
#pragma once
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace infinipot::server {

class Metrics {
 public:
  void request(const std::string& endpoint, int status);
  // One answered job: tokens read and generated, their seconds, the pot's distillations.
  void job(long long prompt_tokens, long long generated_tokens, double prefill_s, double decode_s, int distillations);
  // The engine's memory report (Engine::memory_report), taken on the device thread after a job.
  void memory(const nlohmann::json& report);
  // A job stopped because its client went away (waiting in the queue, reading, or generating).
  void cancelled();
  // Gauges read as the page is written.
  struct Gauges {
    int queue_depth = 0;
    bool busy = false;
    int conversations_in_memory = 0;
    int conversations_on_disk = 0;
    int documents = 0;
  };
  std::string text(const Gauges& g) const;

 private:
  mutable std::mutex m_;
  std::map<std::pair<std::string, int>, long long> requests_;
  long long prompt_tokens_ = 0, generated_tokens_ = 0, distillations_ = 0, jobs_ = 0, cancelled_ = 0;
  double prefill_s_ = 0, decode_s_ = 0;
  double last_prefill_tok_s_ = 0, last_decode_tok_s_ = 0;
  nlohmann::json memory_ = nlohmann::json::object();
};

}  // namespace infinipot::server
