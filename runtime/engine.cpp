#include "runtime/engine.h"

#include <algorithm>

namespace infinipot {

Engine::Engine(const EngineOptions& opts)
    : opts_(opts), file_(gguf::GgufFile::open(opts.model_path)), cfg_(read_llama_config(file_)),
      table_(map_weights(file_, cfg_)) {
  tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(file_));
  template_ = std::make_unique<ChatTemplate>(ChatTemplate::from_gguf(file_));
}

Engine::~Engine() = default;

std::vector<TokenId> Engine::chat_prompt(const std::string& system, const std::string& user) const {
  // Render with a sentinel in place of the user's text, then tokenize the template parts
  // with special-token parsing and the user's text without.
  static const std::string kSentinel = "\x01infinipot-user-text\x01";
  std::vector<ChatMessage> msgs;
  if (!system.empty()) msgs.push_back({"system", system});
  msgs.push_back({"user", kSentinel});
  const std::string rendered = template_->render(msgs, /*add_generation_prompt=*/true);
  const size_t at = rendered.find(kSentinel);
  if (at == std::string::npos) throw std::logic_error("chat template dropped the user message");
  std::vector<TokenId> out = tokenizer_->encode(rendered.substr(0, at), false, true);
  const auto body = tokenizer_->encode(user, false, false);
  const auto tail = tokenizer_->encode(rendered.substr(at + kSentinel.size()), false, true);
  out.insert(out.end(), body.begin(), body.end());
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

void Engine::prepare(int kv_capacity) {
  forward_.reset();
  kv_.reset();
  model_.reset();
  ctx_.reset();
  cl::ContextOptions co;
  co.device = opts_.device;
  co.device_mem = opts_.device_mem;
  ctx_ = std::make_unique<cl::Context>(co);
  chunk_ = opts_.chunk > 0 ? opts_.chunk : ctx_->tuning().prefill_chunk;
  chunk_ = std::max(1, std::min(chunk_, kv_capacity));
  if (opts_.kv_type == "auto") kv_half_ = ctx_->device().fp16;
  else if (opts_.kv_type == "f16" || opts_.kv_type == "f32") kv_half_ = opts_.kv_type == "f16";
  else throw std::invalid_argument("--kv-type must be auto, f16 or f32, got '" + opts_.kv_type + "'");

  cl::MemoryPlan plan = Forward::plan(cfg_, chunk_, ctx_->tuning().gemm_backend);
  plan[cl::MemCategory::Weights] = device_weight_bytes(file_, table_);
  plan[cl::MemCategory::KvCache] = KvStore::bytes_needed(cfg_, kv_capacity, kv_half_);
  const uint64_t per_entry = KvStore::bytes_needed(cfg_, 1, kv_half_);
  ctx_->memory().check_plan(plan, "a smaller KV capacity (" + std::to_string(kv_capacity) + " entries take " +
                                      cl::format_bytes(plan[cl::MemCategory::KvCache]) + ", " +
                                      cl::format_bytes(per_entry) + " per token)" +
                                      (kv_half_ ? "" : ", or --kv-type f16 to halve it"));

  model_ = std::make_unique<DeviceModel>(upload_model(*ctx_, file_, cfg_, table_));
  kv_ = std::make_unique<KvStore>(*ctx_, cfg_, kv_capacity, kv_half_);
  forward_ = std::make_unique<Forward>(*ctx_, *model_, *kv_, chunk_);
}

nlohmann::json Engine::memory_report() const {
  return ctx_ ? ctx_->memory().report() : nlohmann::json::object();
}

}  // namespace infinipot
