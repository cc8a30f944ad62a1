#include "server/metrics.h"

#include <sstream>

namespace infinipot::server {

void Metrics::request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(m_);
  ++requests_[{endpoint, status}];
}

void Metrics::job(long long prompt_tokens, long long generated_tokens, double prefill_s, double decode_s,
                  int distillations) {
  std::lock_guard<std::mutex> lock(m_);
  ++jobs_;
  prompt_tokens_ += prompt_tokens;
  generated_tokens_ += generated_tokens;
  prefill_s_ += prefill_s;
  decode_s_ += decode_s;
  distillations_ += distillations;
  if (prefill_s > 0 && prompt_tokens > 0) last_prefill_tok_s_ = prompt_tokens / prefill_s;
  if (decode_s > 0 && generated_tokens > 1) last_decode_tok_s_ = (generated_tokens - 1) / decode_s;
}

void Metrics::cancelled() {
  std::lock_guard<std::mutex> lock(m_);
  ++cancelled_;
}

void Metrics::memory(const nlohmann::json& report) {
  std::lock_guard<std::mutex> lock(m_);
  memory_ = report;
}

std::string Metrics::text(const Gauges& g) const {
  std::lock_guard<std::mutex> lock(m_);
  std::ostringstream o;
  auto head = [&](const char* name, const char* type, const char* help) {
    o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  };
  head("infinipot_requests_total", "counter", "HTTP requests answered, by endpoint and status.");
  for (const auto& [key, n] : requests_)
    o << "infinipot_requests_total{endpoint=\"" << key.first << "\",status=\"" << key.second << "\"} " << n << "\n";
  head("infinipot_jobs_cancelled_total", "counter", "Jobs stopped because their client went away.");
  o << "infinipot_jobs_cancelled_total " << cancelled_ << "\n";
  head("infinipot_prompt_tokens_total", "counter", "Prompt tokens read into the device (held ones not counted).");
  o << "infinipot_prompt_tokens_total " << prompt_tokens_ << "\n";
  head("infinipot_generated_tokens_total", "counter", "Tokens generated.");
  o << "infinipot_generated_tokens_total " << generated_tokens_ << "\n";
  head("infinipot_prefill_seconds_total", "counter", "Seconds spent reading prompts (distillations included).");
  o << "infinipot_prefill_seconds_total " << prefill_s_ << "\n";
  head("infinipot_decode_seconds_total", "counter", "Seconds spent generating.");
  o << "infinipot_decode_seconds_total " << decode_s_ << "\n";
  head("infinipot_prefill_tokens_per_second", "gauge", "Prefill speed of the last job.");
  o << "infinipot_prefill_tokens_per_second " << last_prefill_tok_s_ << "\n";
  head("infinipot_decode_tokens_per_second", "gauge", "Decode speed of the last job.");
  o << "infinipot_decode_tokens_per_second " << last_decode_tok_s_ << "\n";
  head("infinipot_distillations_total", "counter", "Memory-pot distillations (CCD cycles) run.");
  o << "infinipot_distillations_total " << distillations_ << "\n";
  head("infinipot_device_bytes", "gauge", "Device memory in use, by category.");
  if (memory_.contains("by_category"))
    for (const auto& [category, v] : memory_["by_category"].items())
      o << "infinipot_device_bytes{category=\"" << category << "\"} " << v.value("used", uint64_t(0)) << "\n";
  head("infinipot_device_peak_bytes", "gauge", "Peak device memory in use.");
  o << "infinipot_device_peak_bytes " << memory_.value("peak", uint64_t(0)) << "\n";
  head("infinipot_device_budget_bytes", "gauge", "The device-memory budget.");
  o << "infinipot_device_budget_bytes " << memory_.value("budget", uint64_t(0)) << "\n";
  head("infinipot_queue_depth", "gauge", "Jobs waiting for the device.");
  o << "infinipot_queue_depth " << g.queue_depth << "\n";
  head("infinipot_device_busy", "gauge", "1 while a job runs on the device.");
  o << "infinipot_device_busy " << (g.busy ? 1 : 0) << "\n";
  head("infinipot_conversations", "gauge", "Conversations held, in memory (one on the device) and on disk.");
  o << "infinipot_conversations{where=\"memory\"} " << g.conversations_in_memory << "\n";
  o << "infinipot_conversations{where=\"disk\"} " << g.conversations_on_disk << "\n";
  head("infinipot_documents", "gauge", "Documents held (read once, asked many times).");
  o << "infinipot_documents " << g.documents << "\n";
  return o.str();
}

}  // namespace infinipot::server
