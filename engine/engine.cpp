#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <utility>

#include "model_loader/runnable.h"
#include "model_loader/setting_names.h"
#include "pot/policy_registry.h"
#include "runtime/trace.h"

namespace infinipot {

Engine::Engine(const EngineOptions& opts)
    : load_span_(std::make_unique<trace::Span>("load", "load model (GGUF, tokenizer)")),
      opts_(opts), file_(gguf::GgufFile::open(opts.model_path)) {
  // The checks `inspect` reports as "cannot run: ..." (model_loader/runnable.h).
  RunnableModel m = load_runnable_model(file_);
  cfg_ = std::move(m.config);
  table_ = std::move(m.weights);
  tokenizer_ = std::make_unique<Tokenizer>(std::move(m.tokenizer));
  template_ = std::make_unique<ChatTemplate>(std::move(m.chat_template));
  load_span_.reset();
}

Engine::~Engine() = default;

std::vector<TokenId> PromptParts::all() const {
  std::vector<TokenId> out(prefix);
  for (const auto* part : {&body, &question, &tail}) out.insert(out.end(), part->begin(), part->end());
  return out;
}

PromptParts Engine::prompt_parts(const std::string& system, const std::string& document, const std::string& question,
                                 bool raw) const {
  // The parts are tokenized one by one, each but the first as the continuation of the text
  // before it, so that they add up to the whole prompt's encoding (SentencePiece adds its
  // space prefix only at the start of the text and after a special token). BOS goes first
  // when the vocabulary asks for it (tokenizer.ggml.add_bos_token: Gemma, Llama 3; not
  // SmolLM2), as llama.cpp adds it, unless a chat template wrote it already.
  PromptParts p;
  if (!question.empty()) p.question = tokenizer_->encode_continuation("\n\n" + question, false);
  std::string head, tail;  // the chat template's text before and after the user's
  if (!raw && !template_->completion()) {
    // Render with a sentinel in place of the user's text, then tokenize the template parts
    // with special-token parsing and the user's text without.
    static const std::string kSentinel = "\x01infinipot-user-text\x01";
    std::vector<ChatMessage> msgs;
    if (!system.empty()) msgs.push_back({"system", system});
    msgs.push_back({"user", kSentinel});
    const std::string rendered = template_->render(msgs, /*add_generation_prompt=*/true);
    const size_t at = rendered.find(kSentinel);
    if (at == std::string::npos) throw std::logic_error("chat template dropped the user message");
    head = rendered.substr(0, at);
    tail = rendered.substr(at + kSentinel.size());
  }
  p.prefix = tokenizer_->encode(head, false, true);
  const TokenId bos = tokenizer_->bos();
  if (tokenizer_->add_bos_default() && bos >= 0 && (p.prefix.empty() || p.prefix.front() != bos))
    p.prefix.insert(p.prefix.begin(), bos);
  // The document goes on from the template's raw text ("user\n"), unless there is none or the
  // template put a special token right before it.
  p.body = tokenizer_->ends_with_special_token(head) ? tokenizer_->encode(document, false, false)
                                                     : tokenizer_->encode_continuation(document, false);
  if (!tail.empty()) p.tail = tokenizer_->encode_continuation(tail, true);
  return p;
}

std::vector<TokenId> Engine::chat_prompt(const std::string& system, const std::string& user) const {
  return prompt_parts(system, user, "").all();
}

std::vector<TokenId> Engine::catalyst_prompt(const PromptParts& parts, const std::string& text, int* question_rows) const {
  std::vector<TokenId> out = tokenizer_->encode_continuation("\n\n" + text, false);
  if (question_rows) *question_rows = static_cast<int>(out.size());
  out.insert(out.end(), parts.tail.begin(), parts.tail.end());
  return out;
}

void Engine::prepare(int kv_capacity) { prepare_device(kv_capacity, nullptr); }

void Engine::prepare(const PotPlan& plan) {
  if (!plan.sized()) throw std::logic_error("prepare: the plan's store is not sized");
  if (!plan.pot()) {
    prepare(plan.kv_capacity());
    return;
  }
  check_pot_chunk(static_cast<int>(plan.catalyst().size()), plan.kv_capacity());
  prepare_device(plan.kv_capacity(), plan.pot());
  pot_ = std::make_unique<MemoryPot>(*ctx_, *forward_, *kv_, cfg_, *tokenizer_, *plan.pot());
  ++stream_id_;
}

uint64_t Engine::plan_bytes(const PotPlan& plan) {
  if (!ctx_) open_context();
  return plan_for(plan.kv_capacity(), plan.pot()).total();
}

void Engine::prepare_pot(const PotOptions& pot) {
  if (pot.keep <= 0 || pot.keep >= pot.capacity) throw std::logic_error("prepare_pot: resolve the pot options first");
  prepare_device(pot.capacity, &pot);
  pot_ = std::make_unique<MemoryPot>(*ctx_, *forward_, *kv_, cfg_, *tokenizer_, pot);
  ++stream_id_;
}

void Engine::open_context() {
  pot_.reset();
  forward_.reset();
  kv_.reset();
  model_.reset();
  ctx_.reset();
  cl::ContextOptions co;
  co.device = opts_.device;
  co.device_mem = opts_.device_mem;
  co.tuning_overrides = opts_.tuning_overrides;
  co.native_dot_form = opts_.native_dot_form;
  ctx_ = std::make_unique<cl::Context>(co);
  if (opts_.kv_type == "auto") kv_half_ = ctx_->device().fp16;
  else if (opts_.kv_type == "f16" || opts_.kv_type == "f32") kv_half_ = opts_.kv_type == "f16";
  else throw SettingError("kv_type", opts_.kv_type, "auto, f16 or f32", "{kv_type} must be auto, f16 or f32, got '" + opts_.kv_type + "'");
  if (opts_.weights != "auto" && opts_.weights != "in_place" && opts_.weights != "copy")
    throw SettingError("weights", opts_.weights, "auto, in_place or copy",
                       "{weights} must be auto, in_place or copy, got '" + opts_.weights + "'");
}

int Engine::chunk_of(int kv_capacity) const {
  const int chunk = opts_.chunk > 0 ? opts_.chunk : ctx_->tuning().prefill_chunk;
  return std::max(1, std::min(chunk, kv_capacity));
}

int Engine::planned_chunk(int kv_capacity) {
  if (opts_.chunk <= 0 && !ctx_) open_context();  // the default chunk is the device's tuning
  return chunk_of(kv_capacity);
}

const std::string& Engine::device_name() {
  if (!ctx_) open_context();
  return ctx_->device().name;
}

void Engine::check_pot_chunk(int catalyst_tokens, int kv_capacity) {
  if (!cfg_.has_local_layers()) return;  // only the local store limits the catalyst to a chunk
  MemoryPot::check_catalyst_fits_chunk(cfg_, catalyst_tokens, planned_chunk(kv_capacity));
}

cl::MemoryPlan Engine::plan_for(int kv_capacity, const PotOptions* pot) const {
  const int chunk = chunk_of(kv_capacity);
  // kv_cache: the global layers' store (full cache or pot: kv_capacity entries each) plus,
  // from Forward::plan, the sliding-window layers' fixed store (window + chunk entries each).
  cl::MemoryPlan plan = Forward::plan(cfg_, chunk, ctx_->tuning(), kv_half_);
  plan[cl::MemCategory::Weights] = device_weight_bytes(file_, table_);
  plan[cl::MemCategory::KvCache] += KvStore::bytes_needed(cfg_, kv_capacity, kv_half_);
  if (pot) plan[cl::MemCategory::KvSelection] = MemoryPot::scoring_bytes(cfg_, kv_capacity, kv_half_, *pot);
  return plan;
}

int Engine::largest_pot(const PotPlan& draft, int most) {
  if (!ctx_) open_context();
  // Small pots fail the layout (prefix, catalyst and answer must fit); past that, a pot fits
  // the budget up to some size: two binary searches, the second over the pots that resolve.
  auto resolved = [&](int capacity) -> std::optional<PotPlan> {
    try {
      return draft.with_capacity(capacity);
    } catch (const std::invalid_argument&) {
      return std::nullopt;
    }
  };
  if (most < 2 || !resolved(most)) return 0;
  int lo = 2, hi = most;  // smallest that resolves, in [lo, hi]
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (resolved(mid)) hi = mid;
    else lo = mid + 1;
  }
  const uint64_t budget = ctx_->memory().budget();
  auto fits = [&](int capacity) { return plan_bytes(*resolved(capacity)) <= budget; };
  if (!fits(lo)) return 0;
  hi = most;  // largest that fits, in [lo, hi]
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

const std::string& Engine::model_id() {
  if (model_id_.empty()) {
    uint64_t h = fnv1a64(nullptr, 0);
    for (const auto& t : file_.tensors()) {
      h = fnv1a64(reinterpret_cast<const uint8_t*>(t.name.data()), t.name.size(), h);
      const uint64_t shape[2] = {static_cast<uint64_t>(t.type), t.n_bytes};
      h = fnv1a64(reinterpret_cast<const uint8_t*>(shape), sizeof shape, h);
      // Checked reads in slices (not the mapping: a truncated file is an error, not SIGBUS).
      std::vector<uint8_t> slice(std::min<uint64_t>(t.n_bytes, 1 << 22));
      for (uint64_t at = 0; at < t.n_bytes; at += slice.size()) {
        const uint64_t n = std::min<uint64_t>(slice.size(), t.n_bytes - at);
        file_.read_tensor(t, slice.data(), at, n);
        h = fnv1a64(slice.data(), n, h);
      }
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%zu:%016llx", file_.file_size(), static_cast<unsigned long long>(h));
    model_id_ = buf;
  }
  return model_id_;
}

int Engine::largest_full_cache(int most) {
  if (!ctx_) open_context();
  const uint64_t budget = ctx_->memory().budget();
  if (most < 1 || plan_for(1, nullptr).total() > budget) return 0;
  int lo = 1, hi = most;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (plan_for(mid, nullptr).total() <= budget) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

void Engine::prepare_device(int kv_capacity, const PotOptions* pot) {
  ++stream_id_;  // whatever the store held is gone
  trace::Span span("load", "prepare device (context, weights, KV store)", {{"kv_capacity", kv_capacity}});
  const bool with_pot = pot != nullptr;
  open_context();
  chunk_ = chunk_of(kv_capacity);
  const cl::MemoryPlan plan = plan_for(kv_capacity, pot);
  const uint64_t per_entry = KvStore::bytes_needed(cfg_, 1, kv_half_);
  std::string entries = std::to_string(kv_capacity) + " entries take " +
                        cl::format_bytes(KvStore::bytes_needed(cfg_, kv_capacity, kv_half_)) + ", " +
                        cl::format_bytes(per_entry) + " per token";
  if (cfg_.has_local_layers())
    entries += " in the " + std::to_string(cfg_.n_global_layers()) + " global layers; the sliding-window layers "
               "take a fixed " + cl::format_bytes(plan[cl::MemCategory::KvCache] - KvStore::bytes_needed(cfg_, kv_capacity, kv_half_));
  const std::string half_hint = kv_half_ ? "" : ", or {kv_type} f16 to halve it";
  const Reading& reading = with_pot ? *find_policy(pot->policy).reading : reading_full_cache();
  ctx_->memory().check_plan(plan, reading.smaller_store(pot ? pot->policy : "", entries) + half_hint);

  const WeightPlace place = opts_.weights == "in_place" ? WeightPlace::InPlace
                            : opts_.weights == "copy"   ? WeightPlace::Copied
                                                        : default_weight_place(*ctx_);
  const auto upload_start = std::chrono::steady_clock::now();
  model_ = std::make_unique<DeviceModel>(upload_model(*ctx_, file_, cfg_, table_, place));
  ctx_->finish();  // the copies done, so the time is the load's
  weights_load_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - upload_start).count();
  kv_ = std::make_unique<KvStore>(*ctx_, cfg_, kv_capacity, kv_half_);
  forward_ = std::make_unique<Forward>(*ctx_, *model_, *kv_, chunk_);
  forward_->set_round_activations(opts_.round_activations);
  trace::sync(ctx_->queue());
}

nlohmann::json Engine::memory_report() const {
  if (!ctx_) return nlohmann::json::object();
  nlohmann::json r = ctx_->memory().report();
  // Where the bytes live: on a device that shares the host's DRAM, its buffers are host
  // memory (in this process's RSS on PoCL), and the model file's pages left in the page cache
  // are DRAM too.
  r["unified_memory"] = ctx_->device().host_unified;
  if (model_) r["weights_place"] = weight_place_name(model_->place);
  r["model_file_cached_bytes"] = file_.cached_bytes();
  return r;
}

}  // namespace infinipot
