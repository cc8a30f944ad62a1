// The engine a command runs: the model file and tokenizer on the host, then (prepare) the
// OpenCL context, weights, KV store and forward pass on the device under one budget.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include "model_loader/chat_template.h"
#include "model_loader/gguf.h"
#include "model_loader/model_config.h"
#include "model_loader/tokenizer.h"
#include "engine/pot_plan.h"
#include "pot/memory_pot.h"
#include "runtime/kv_store.h"
#include "runtime/context.h"
#include "runtime/forward.h"
#include "runtime/model_weights.h"
#include "runtime/sampling.h"
#include "runtime/trace.h"

namespace infinipot {

struct EngineOptions {
  std::string model_path;
  std::string device;          // --device
  uint64_t device_mem = 0;     // --device-mem (0: the device's global memory)
  int chunk = 0;               // prefill chunk (0: from platforms/ tuning)
  // KV store element type: "f16" (half the memory, fp32 arithmetic), "f32", or "auto":
  // f16 where the device has cl_khr_fp16 (GPUs), f32 where not (PoCL).
  std::string kv_type = "auto";
  // --round-activations: products multiply their inputs rounded as llama.cpp's CPU backend
  // quantizes them (Forward::set_round_activations), to compare against it; costs precision.
  bool round_activations = false;
  // Where the weights live: "auto" (in place, in the host memory the device shares, where it
  // reports CL_DEVICE_HOST_UNIFIED_MEMORY; copied into device buffers elsewhere), "in_place"
  // or "copy" (to compare the two, or to keep a discrete GPU's weights in host memory).
  std::string weights = "auto";
  nlohmann::json tuning_overrides = nlohmann::json::object();  // over platforms/tuning.json (infinipot tune)
  int native_dot_form = -1;  // cl::ContextOptions::native_dot_form (tests run each form)
};

// Where a prefill stands, reported after each chunk the device has evaluated.
struct PrefillProgress {
  int done = 0;          // prompt tokens evaluated so far
  int total = 0;         // prompt tokens in all
  double elapsed_s = 0;  // since the prompt was submitted
  int cycles = 0;        // pot distillations so far (0 without a pot)
};

struct GenerateOptions {
  int n_predict = 256;
  SamplerOptions sampler;
  std::function<void(const std::string&)> on_text;  // streamed pieces of the answer
  std::function<void(const PrefillProgress&)> on_prefill;  // after each prefill chunk (may be empty)
  bool ignore_eos = false;  // generate n_predict tokens whatever they are (benchmarks)
  // Asked before each token is sampled: true stops the answer there (stop_reason
  // "cancelled"): a client gone, a stop sequence matched, the C API's callback said stop.
  std::function<bool()> cancelled;
  // With a pot: called once the document is read (prefix + document tokens in the pot's
  // stream), before the question goes in: where a snapshot is taken (--save-pot).
  std::function<void(const std::vector<TokenId>&)> after_read;
  // With a pot: called once the document is read, before SnapKV's one selection (so there
  // the pot still holds the whole input) and before after_read.
  std::function<void()> after_body;
  // With a pot: called after each chunk of the document the pot reads, with how many document
  // tokens it has read so far; engine.pot()->capture() there snapshots the pot mid-document
  // (nih shares a document prefix between trials this way: engine/prefix_forks.h).
  std::function<void(int body_done)> after_chunk;
  // With a pot: start from this snapshot, taken after the first resume_body document tokens
  // of this very prompt (checked: its stream must be this prompt's prefix and document start),
  // instead of reading the document from its start. The pot then ends exactly as if it had read
  // the whole document, provided its settings and catalyst are the snapshot's.
  const PotSnapshot* resume = nullptr;
  int resume_body = 0;
};

struct GenerateResult {
  std::string text;
  std::vector<TokenId> tokens;
  int prompt_tokens = 0;
  double ttft_s = 0;          // prompt submitted -> first token sampled
  double prefill_s = 0;
  double decode_s = 0;
  std::string stop_reason;    // "eos" | "length" | "cancelled"
  // Of tokens, how many went into the KV store (the last one sampled at the length limit
  // does not: a conversation reads it before its next turn).
  int evaluated = 0;
};

// A prompt in the parts the memory pot treats differently.
struct PromptParts {
  std::vector<TokenId> prefix;    // template before the user's text (system prompt, user header): pinned
  std::vector<TokenId> body;      // the user's text / document: read through the pot
  std::vector<TokenId> question;  // "\n\n" + question, as text (empty without one)
  std::vector<TokenId> tail;      // template after the user's text (end of turn, assistant header)
  std::vector<TokenId> all() const;
};

class Engine {
 public:
  // Opens and validates the model and its tokenizer (no device work yet).
  explicit Engine(const EngineOptions& opts);
  ~Engine();

  const LlamaConfig& config() const { return cfg_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ChatTemplate& chat_template() const { return *template_; }
  const gguf::GgufFile& file() const { return file_; }

  // Prompt tokens of one user turn in the model's chat template (system: "" = template's
  // default). The user's text is data: control-token text inside it ("<|im_end|>") stays
  // text; only the template's own markers become special tokens.
  std::vector<TokenId> chat_prompt(const std::string& system, const std::string& user) const;
  // The same turn in parts: user text = document, then "\n\n" + question when one is given.
  // raw, or a model without a chat template (completion mode): the text as is, after BOS when
  // the model asks for one (prefix = [BOS] or empty; tail empty).
  PromptParts prompt_parts(const std::string& system, const std::string& document, const std::string& question,
                           bool raw = false) const;
  // The catalyst prompt (CaP): text asked where the question will be, in the same template,
  // so it attends to the pot the way the real question will. question_rows (if given): how
  // many of its tokens are the question itself, before the template's tail.
  std::vector<TokenId> catalyst_prompt(const PromptParts& parts, const std::string& text, int* question_rows = nullptr) const;

  // Creates the device side of a job's plan: its KV store (and pot, when it has one), after
  // checking the whole memory plan against the budget (BudgetError naming what to change).
  void prepare(const PotPlan& plan);
  // Device bytes the plan needs in all (weights, activations, KV store, pot scoring).
  uint64_t plan_bytes(const PotPlan& plan);
  // Creates the device side for a KV capacity of kv_capacity entries. Checks the whole
  // memory plan against the budget first; throws BudgetError naming the minimum.
  void prepare(int kv_capacity);
  // With a memory pot: the KV store holds pot.capacity entries and the pot's scoring buffers
  // are planned and allocated too. pot must come from MemoryPot::resolve.
  void prepare_pot(const PotOptions& pot);
  // The largest pot capacity (KV entries) whose whole memory plan fits the budget
  // (--device-mem, else the device's memory) for the draft's prompt and policy (its
  // capacity and keep are chosen here, keep at the policy's default), searched up to `most`
  // entries. 0 when not even the smallest pot the layout allows fits. Opens the device
  // context if needed; allocates nothing.
  int largest_pot(const PotPlan& draft, int most);
  // The largest full KV cache (entries = prompt + answer tokens) that fits the budget, up
  // to `most`; 0 if none does.
  int largest_full_cache(int most);
  // The prefill chunk prepare(kv_capacity) / prepare_pot will use (opens the device context
  // when the chunk comes from its tuning; allocates nothing).
  int planned_chunk(int kv_capacity);
  // Before any device work: throws std::invalid_argument naming --chunk when a model with
  // sliding-window layers could not run a catalyst prompt of this length in one chunk
  // (MemoryPot::check_catalyst_fits_chunk). No-op for other models.
  void check_pot_chunk(int catalyst_tokens, int kv_capacity);
  MemoryPot* pot() { return pot_.get(); }
  // The OpenCL device's name (opens the device context if needed; allocates nothing).
  const std::string& device_name();
  cl::Context& context() { return *ctx_; }
  KvStore& kv() { return *kv_; }
  Forward& forward() { return *forward_; }
  int chunk() const { return chunk_; }
  bool kv_half() const { return kv_half_; }
  const EngineOptions& options() const { return opts_; }

  // Feeds the prompt (chunked prefill) then samples until EOS/end-of-turn or n_predict.
  GenerateResult generate(const std::vector<TokenId>& prompt, const GenerateOptions& opts);
  // Reads the prompt through the store prepare(plan) made and samples as above: with a pot,
  // the prefix pinned, the body distilled as it overflows (the plan's reading finishes it:
  // SnapKV's one selection), question and tail appended whole; without, the plain cache.
  GenerateResult generate(const PromptParts& prompt, const PotPlan& plan, const GenerateOptions& opts);
  // Reads the prompt through the memory pot (prepare_pot): prefix pinned, body distilled as it
  // overflows, reading.after_document once the body is in, question and tail appended
  // whole; then samples as generate() does.
  GenerateResult generate(const PromptParts& prompt, const std::vector<TokenId>& catalyst, const GenerateOptions& opts,
                          int question_rows = 0, const Reading& reading = reading_through_pot());
  // Answers from a restored pot (--load-pot): the pot (prepare_pot with the snapshot's
  // options) takes the snapshot's state, then the question and tail go in and it samples as
  // generate() does. prompt.body is ignored (the snapshot holds the document).
  GenerateResult generate_restored(const PromptParts& prompt, const PotSnapshot& snap,
                                   const std::vector<TokenId>& catalyst, const GenerateOptions& opts,
                                   int question_rows = 0);
  // Streaming reads (the C API's feed: the document arrives in pieces; engine/stream.cpp).
  // stream_begin: a pot prepared with prepare_pot takes the chat prefix and the catalyst;
  // stream_read: the next document tokens (the last one is held back until the next call or
  // stream_answer, as the successor NuC scores it by); stream_answer: the held token, the
  // question and the template's tail go in (distilling once if they need room), then
  // sampling as generate() does.
  void stream_begin(const std::vector<TokenId>& prefix, const std::vector<TokenId>& catalyst, int question_rows = 0);
  void stream_read(const std::vector<TokenId>& tokens);
  // room_after: entries the pot keeps free beyond the answer (a conversation's next catalyst
  // must fit beside what the pot holds, to distill).
  GenerateResult stream_answer(const std::vector<TokenId>& final_part, const GenerateOptions& opts, int room_after = 0);
  int stream_tokens() const { return stream_read_; }
  bool stream_holds_token() const { return stream_held_ >= 0; }  // the last token fed is not read yet
  // Changes whenever the pot starts holding another stream (stream_begin, stream_restore,
  // prepare): who read a stream can tell whether the pot still holds it.
  uint64_t stream_id() const { return stream_id_; }
  // Conversations (engine/conversation.h) read turn after turn into one stream:
  // stream_catalyst: the catalyst CaP uses from now on (the newest user turn);
  // stream_make_room: distills now unless n more tokens fit beside the catalyst, so that a
  // message read next is not cut by a distillation; stream_capture / stream_restore: the
  // stream's pot as a snapshot (every token fed so far: `tokens`), and back, to read on.
  void stream_catalyst(const std::vector<TokenId>& catalyst, int question_rows);
  void stream_make_room(int n);
  void stream_flush();  // reads the held-back token (its successor unknown: unscored)
  // held: a stream parked mid-read (the C API's feed) keeps its held-back token out of the
  // snapshot (given here, -1 for none) and back in at restore, so that reading on after a
  // park is exactly reading on without one. Without `held`, capture refuses a held token.
  PotSnapshot stream_capture(const std::vector<TokenId>& tokens, TokenId* held = nullptr);
  void stream_restore(const PotSnapshot& snap, const std::vector<TokenId>& catalyst, int question_rows,
                      TokenId held = -1);
  // The model's identity for snapshots: file size and a 64-bit hash of every tensor's name,
  // type, shape and bytes (computed once).
  const std::string& model_id();
  // The token counts the pot must fit for this prompt and -n (what generate() checks).
  static PotLayout pot_layout(const PromptParts& prompt, const std::vector<TokenId>& catalyst, int n_predict);
  nlohmann::json memory_report() const;
  // Seconds the last prepare spent putting the weights on the device (read, upload, drop).
  double weights_load_s() const { return weights_load_s_; }

 private:
  void prepare_device(int kv_capacity, const PotOptions* pot);
  void open_context();
  cl::MemoryPlan plan_for(int kv_capacity, const PotOptions* pot) const;
  int chunk_of(int kv_capacity) const;  // planned_chunk once the context is open
  // Samples the next token from the last row evaluated (greedy on the device), evaluates it,
  // until EOS or n_predict (the prompt is in).
  void decode(const GenerateOptions& opts, std::chrono::steady_clock::time_point t0, GenerateResult& r);
  std::string model_id_;
  TokenId stream_held_ = -1;  // the last document token fed, not yet read (see stream_read)
  int stream_read_ = 0;       // prefix + document tokens fed so far
  uint64_t stream_id_ = 0;
  std::unique_ptr<trace::Span> load_span_;  // the model's loading, in a trace (first member: starts first)
  EngineOptions opts_;
  gguf::GgufFile file_;
  LlamaConfig cfg_;
  WeightTable table_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ChatTemplate> template_;
  std::unique_ptr<cl::Context> ctx_;
  std::unique_ptr<DeviceModel> model_;
  std::unique_ptr<KvStore> kv_;
  std::unique_ptr<Forward> forward_;
  std::unique_ptr<MemoryPot> pot_;
  int chunk_ = 512;
  bool kv_half_ = false;
  double weights_load_s_ = 0;
};

// Perplexity the way llama.cpp's llama-perplexity computes it: non-overlapping windows of
// n_ctx tokens, each scored on its second half (positions n_ctx/2 .. n_ctx-2 predicting the
// next token), KV cleared between windows.
struct PerplexityResult {
  double perplexity = 0;
  double stderr_ppl = 0;   // uncertainty as llama.cpp estimates it
  int windows = 0;
  int scored_tokens = 0;
  int n_tokens = 0;
  double seconds = 0;
};
PerplexityResult perplexity(Engine& engine, const std::vector<TokenId>& tokens, int n_ctx,
                            const std::function<void(int, int, double)>& progress = {});

}  // namespace infinipot
