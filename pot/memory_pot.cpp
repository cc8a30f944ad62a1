#include "pot/memory_pot.h"
#include "runtime/trace.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cctype>
#include <limits>
#include <stdexcept>
#include <string>

#include "model_loader/setting_names.h"
#include "pot/policy_registry.h"
#include "pot/word_runs.h"
#include "runtime/cl_error.h"

namespace infinipot {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
constexpr float kNoScore = std::numeric_limits<float>::quiet_NaN();
std::string str(long long v) { return std::to_string(v); }

// The policy the options name, made with their params; throws for one that keeps no pot.
std::unique_ptr<PotPolicy> make_policy(const PotOptions& o) {
  const PolicyInfo& info = find_policy(o.policy);
  if (!info.make) throw SettingError("policy", o.policy, "a policy that keeps a pot", "{policy} " + o.policy + " keeps no pot");
  return info.make(o.params);
}

}  // namespace

PotOptions MemoryPot::resolve(PotOptions o, const PotLayout& L) {
  if (o.capacity <= 0) throw SettingError("pot", str(o.capacity), ">= 1", "{pot} must be a positive number of KV entries, got " + str(o.capacity));
  if (!(o.params.nuc_ratio >= 0.0f && o.params.nuc_ratio <= 1.0f))
    throw SettingError("nuc_ratio", std::to_string(o.params.nuc_ratio), "in [0, 1]",
                       "{nuc_ratio} must lie in [0, 1], got " + std::to_string(o.params.nuc_ratio));
  if (o.params.nuc_stride < 1 || o.params.nuc_stride > PolicyParams::kMaxNucStride) {
    const std::string range = "1.." + str(PolicyParams::kMaxNucStride);
    throw SettingError("policy", str(o.params.nuc_stride), "in " + range,
                       "nuc_stride must lie in " + range + ", got " + str(o.params.nuc_stride));
  }
  if (o.keep_auto && !(o.keep_mass > 0.0f && o.keep_mass <= 1.0f))
    throw SettingError("keep", "auto", "a mass share in (0, 1]", "{keep} auto keeps a share of the scores' mass in (0, 1], got " +
                                                                     std::to_string(o.keep_mass));
  (void)make_policy(o);  // a known policy that keeps a pot
  const int M = o.capacity, P = pinned_of(o, L.pinned), K = L.catalyst;
  // A document that overflows the pot ends with a distillation; then the question, template
  // tail and answer (F) go in beside the kept entries with no distillation after them.
  const bool never_full = static_cast<long long>(P) + L.body + L.final_tokens <= M;
  const long long F = never_full ? 0 : L.final_tokens;
  // The smallest pot that can distill at all: prefix + one kept entry + catalyst + one new
  // token; with the default --keep, also room for F beside the prefix and one kept entry (an
  // explicit --keep that leaves no room for F is refused below, naming the pot it needs).
  const bool answer_binds = o.keep == 0 && P + 1 + F > P + K + 2;
  const long long min_pot = answer_binds ? P + 1 + F : P + K + 2;
  if (M < min_pot)
    throw SettingError(
        "pot", str(M), ">= " + str(min_pot),
        "{pot} " + str(M) + " cannot hold the chat prefix (" + str(P) + " tokens) plus " +
        (answer_binds ? "one kept entry and the question, template and answer (" + str(F) + " tokens) after the last distillation"
                      : "the catalyst prompt (" + str(K) + " tokens) with room to distill") +
        "; use {pot} " + str(min_pot) + " or more (or a shorter {system} / " + (answer_binds ? "question, or a smaller {n_predict})" : "{catalyst})"));
  // Default: half the pot, within the range that works (above the prefix, leaving room for
  // the catalyst and one new token, and for F after the last distillation), so the minimum
  // pot named above works as it is.
  // Under --keep auto, keep is the most a distillation keeps: three quarters of the pot.
  if (o.keep == 0)
    o.keep = static_cast<int>(std::clamp<long long>(o.keep_auto ? 3LL * M / 4 : M / 2, P + 1, std::min<long long>(M - K - 1, M - F)));
  if (o.keep >= M)
    throw SettingError("keep", str(o.keep), "< " + str(M), "{keep} " + str(o.keep) + " must be below {pot} " + str(M) +
                                ": a distillation has to free room for new text");
  if (o.keep <= P)
    throw SettingError("keep", str(o.keep), ">= " + str(P + 1), "{keep} " + str(o.keep) + " leaves no room for the document: the chat prefix alone pins " +
                                str(P) + " entries; use {keep} " + str(P + 1) + " or more");
  if (o.keep + K >= M)
    throw SettingError("keep", str(o.keep), "<= " + str(M - K - 1), "{keep} " + str(o.keep) + " plus the catalyst prompt (" + str(K) + " tokens) fills {pot} " +
                                str(M) + ": no room to read on; use {keep} " + str(M - K - 1) + " or less");
  if (!never_full && o.keep + L.final_tokens > M)
    throw SettingError("pot", str(M), ">= " + str(o.keep + L.final_tokens), "after its last distillation the pot keeps " + str(o.keep) + " entries, and the question, "
                                "template and answer need " + str(L.final_tokens) + " more than {pot} " + str(M) +
                                " holds; lower {n_predict} or {keep}, or raise {pot} to " + str(o.keep + L.final_tokens));
  return o;
}

void MemoryPot::check_catalyst_fits_chunk(const LlamaConfig& cfg, int catalyst_tokens, int chunk) {
  // The sliding-window store takes the catalyst back too; it has room for one chunk past the window.
  if (cfg.has_local_layers() && catalyst_tokens > chunk)
    throw SettingError("chunk", str(chunk), ">= " + str(catalyst_tokens),
                       "the catalyst prompt (" + str(catalyst_tokens) + " tokens) is longer than the prefill "
                                "chunk (" + str(chunk) + "), which a model with sliding-window layers "
                                "needs; use {chunk} " + str(catalyst_tokens) + " or more, or a shorter {catalyst}");
}

PolicyNeeds MemoryPot::needs_of(const PotOptions& opts) { return make_policy(opts)->needs(); }

int MemoryPot::pinned_of(const PotOptions& opts, int prefix) { return make_policy(opts)->pinned(prefix); }

namespace {
// The grouping of a policy's choice (it does not depend on the counts).
ChoiceShape planned_shape(const PotPolicy& policy, const LlamaConfig& cfg, int capacity) {
  PotScores probe;
  probe.n_layers = cfg.n_global_layers();
  probe.n_heads = cfg.n_head_kv;
  probe.stride = probe.size = capacity;
  probe.keep = capacity / 2;
  return policy.plan(probe).shape;
}
}  // namespace

uint64_t MemoryPot::scoring_bytes(const LlamaConfig& cfg, int capacity, bool half, const PotOptions& opts) {
  const auto policy = make_policy(opts);
  const PolicyNeeds n = policy->needs();
  // [global layer][kv head][slot] x 4 bytes: the pot holds (and scores) the global layers only
  const uint64_t row = uint64_t(cfg.n_global_layers()) * cfg.n_head_kv * capacity * 4;
  uint64_t bytes = KvStore::compaction_bytes(cfg, capacity, half);
  if (n.catalyst || n.accumulated || n.last_query) bytes += row;             // attention mass
  if (opts.device_select) {
    const ChoiceShape shape = planned_shape(*policy, cfg, capacity);
    bytes += DeviceChoice::bytes_needed(cfg.n_global_layers(), cfg.n_head_kv, capacity, shape);
    bytes += row * (2 + int(n.novelty) + int(n.accumulated));               // survivors, units, novelty, sums
  }
  return bytes;
}

MemoryPot::MemoryPot(cl::Context& ctx, Forward& forward, KvStore& kv, const LlamaConfig& cfg, const Tokenizer& tokenizer,
                     const PotOptions& opts)
    : ctx_(ctx), fwd_(forward), kv_(kv), cfg_(cfg), opts_(opts), pending_nuc_(kNoScore) {
  if (opts.capacity != kv.capacity())
    throw std::logic_error("MemoryPot: options capacity differs from the KV store's");
  if (opts.keep <= 0 || opts.keep >= opts.capacity) throw std::logic_error("MemoryPot: resolve() the options first");
  if (opts_.positions == PositionRule::Auto) opts_.positions = default_position_rule(cfg.architecture);
  policy_ = make_policy(opts);
  needs_ = policy_->needs();
  if (int(needs_.catalyst) + int(needs_.accumulated) + int(needs_.last_query) > 1)
    throw std::logic_error("MemoryPot: a policy may need one attention measure at most");
  if (kv.n_layers() != cfg.n_global_layers()) throw std::logic_error("MemoryPot: the KV store must hold the global layers");
  const size_t slots = size_t(kv.n_layers()) * cfg.n_head_kv * opts.capacity;
  if (needs_.catalyst || needs_.accumulated || needs_.last_query)
    mass_ = ctx.memory().alloc(cl::MemCategory::KvSelection, slots * sizeof(float), "pot.attention_mass");
  nuc_.assign(slots, kNoScore);
  if (needs_.accumulated) acc_.assign(slots, 0.0f);
  if (opts.device_select) {
    choice_ = std::make_unique<DeviceChoice>(ctx, kv.n_layers(), cfg.n_head_kv, opts.capacity,
                                             planned_shape(*policy_, cfg, opts.capacity));
    auto& mem = ctx.memory();
    survivors_dev_ = mem.alloc(cl::MemCategory::KvSelection, slots * sizeof(int), "pot.survivors");
    unit_dev_ = mem.alloc(cl::MemCategory::KvSelection, slots * sizeof(int), "pot.units");
    if (needs_.novelty) nuc_dev_ = mem.alloc(cl::MemCategory::KvSelection, slots * sizeof(float), "pot.novelty");
    if (needs_.accumulated) acc_dev_ = mem.alloc(cl::MemCategory::KvSelection, slots * sizeof(float), "pot.h2o_sums");
  }
  source_.assign(slots, -1);
  unit_.assign(slots, -1);
  position_.assign(slots, 0);
  // A token continues the run before it by the rule of pot/word_runs.h.
  token_edges_.assign(tokenizer.n_vocab(), 0);
  for (int id = 0; id < tokenizer.n_vocab(); ++id) token_edges_[id] = token_edges(tokenizer.decode_token(id));
}

MemoryPot::~MemoryPot() = default;

std::vector<int> MemoryPot::sources(int layer, int head) const {
  const auto* p = source_.data() + at(layer, head, 0);
  return std::vector<int>(p, p + kv_.size());
}

std::vector<int> MemoryPot::positions(int layer, int head) const {
  const auto* p = position_.data() + at(layer, head, 0);
  return std::vector<int>(p, p + kv_.size());
}

uint64_t MemoryPot::digest() const {
  uint64_t h = fnv1a64(nullptr, 0);
  auto mix = [&h](const void* p, size_t n) { h = fnv1a64(static_cast<const uint8_t*>(p), n, h); };
  const int n = kv_.size();
  mix(&n, sizeof n);
  for (int l = 0; l < kv_.n_layers(); ++l)
    for (int kvh = 0; kvh < cfg_.n_head_kv; ++kvh) {
      const size_t i = at(l, kvh, 0);
      mix(source_.data() + i, n * sizeof(int));
      mix(position_.data() + i, n * sizeof(int));
      mix(nuc_.data() + i, n * sizeof(float));
    }
  return h;
}

void MemoryPot::begin(const std::vector<TokenId>& prefix, const std::vector<TokenId>& catalyst, int question_rows) {
  if (needs_.catalyst && catalyst.empty())
    throw std::invalid_argument("the " + opts_.policy + " policy needs a catalyst prompt");
  kv_.reset();
  stats_ = {};
  decoding_ = false;
  catalyst_ = catalyst;
  question_rows_ = question_rows > 0 && opts_.cap_question_rows ? std::min<int>(question_rows, catalyst.size()) : 0;
  cap_measured_ = false;
  stream_pos_ = 0;
  pending_nuc_ = kNoScore;
  last_token_ = -1;
  last_unit_ = -1;
  pinned_ = policy_->pinned(static_cast<int>(prefix.size()));
  if (pinned_ + static_cast<int>(catalyst.size()) + 2 > opts_.capacity)
    throw std::invalid_argument("the pot cannot hold the pinned prefix plus the catalyst prompt");
  // The engine checked this before any device work (Engine::check_pot_chunk); kept for other callers.
  check_catalyst_fits_chunk(cfg_, static_cast<int>(catalyst.size()), fwd_.max_chunk());
  if (!acc_.empty()) {
    std::fill(acc_.begin(), acc_.end(), 0.0f);
    ctx_.fill_zero(mass_, mass_.bytes());
  }
  for (size_t i = 0; i < prefix.size(); i += fwd_.max_chunk())
    eval_chunk(prefix, i, static_cast<int>(std::min<size_t>(fwd_.max_chunk(), prefix.size() - i)), -1, false);
}

void MemoryPot::set_catalyst(const std::vector<TokenId>& catalyst, int question_rows) {
  if (needs_.catalyst && catalyst.empty())
    throw std::invalid_argument("the " + opts_.policy + " policy needs a catalyst prompt");
  if (!needs_.catalyst) return;  // the policy never runs one
  if (pinned_ + static_cast<int>(catalyst.size()) + 2 > opts_.capacity || opts_.keep + static_cast<int>(catalyst.size()) >= opts_.capacity)
    throw std::invalid_argument("the catalyst prompt (" + str(static_cast<int>(catalyst.size())) +
                                " tokens) leaves the pot no room to read on beside its kept entries");
  check_catalyst_fits_chunk(cfg_, static_cast<int>(catalyst.size()), fwd_.max_chunk());
  catalyst_ = catalyst;
  question_rows_ = question_rows > 0 && opts_.cap_question_rows ? std::min<int>(question_rows, catalyst.size()) : 0;
  cap_measured_ = false;
}

// Evaluates tokens[from, from+n) into the next slots. With score, every row's NLL of the
// token after it becomes that token's NuC (the last row's waits in pending_nuc_).
void MemoryPot::eval_chunk(const std::vector<TokenId>& tokens, size_t from, int n, TokenId next, bool score,
                           bool with_catalyst) {
  const int s0 = kv_.size();
  const int p0 = kv_.next_position();
  cap_measured_ = false;  // whatever was measured, the pot now holds more
  std::vector<TokenId> rows(tokens.begin() + from, tokens.begin() + from + n);
  EvalOptions eo;
  if (needs_.accumulated) eo.mass = &mass_;  // H2O: every query adds its attention
  const int c = with_catalyst ? cap_rows() : 0;
  if (with_catalyst) {  // CaP: the catalyst's question rows, after the chunk's (causal: they see all of it)
    rows.insert(rows.end(), catalyst_.begin(), catalyst_.begin() + c);
    ctx_.fill_zero(mass_, mass_.bytes());
    eo.mass = &mass_;
    eo.mass_from_row = n;
    eo.mass_to_row = n + c;
  }
  {
    trace::Span span(decoding_ ? "decode" : "prefill", decoding_ ? "decode token" : "prefill chunk",
                     {{"tokens", n}, {"pot_entries", s0}, {"catalyst_rows", c}});
    const auto t0 = Clock::now();
    fwd_.eval(rows, eo);
    trace::sync(ctx_.queue());
    if (with_catalyst) {
      // The catalyst's share of the pass, by rows (what it costs run alone is more: the
      // products' weight preparation does not shrink with the rows).
      stats_.catalyst_s += seconds_since(t0) * c / (n + c);
      kv_.set_size(s0 + n, p0 + n);
      cap_measured_ = true;
      ++stats_.catalyst_fused;
    }
  }
  std::vector<float> nll;
  if (score && needs_.novelty) {
    trace::Span span("ccd", "NuC (novelty of the chunk)", {{"tokens", n}});
    const auto t0 = Clock::now();
    // Row r scores the token after it (stream index stream_pos_ + r + 1); with nuc_stride k
    // only the rows whose next token's index is a multiple of k, the rest stay unscored (NaN).
    const int k = opts_.params.nuc_stride;
    const int first = (k - (stream_pos_ + 1) % k) % k;
    std::vector<TokenId> targets;
    for (int r = first; r < n; r += k) targets.push_back(from + r + 1 < tokens.size() ? tokens[from + r + 1] : next);
    if (!targets.empty()) {
      const std::vector<float> scored = fwd_.token_nll(targets, first, k);
      nll.assign(n, kNoScore);
      for (size_t i = 0; i < scored.size(); ++i) nll[first + i * k] = scored[i];
    }
    stats_.novelty_s += seconds_since(t0);
  }
  // Word / digit runs: a token joining the one before takes its run's start.
  std::vector<int> unit(n);
  for (int r = 0; r < n; ++r) {
    const TokenId t = tokens[from + r];
    const int at = stream_pos_ + r;
    const bool known = last_token_ >= 0 && last_unit_ >= 0 && t >= 0 && size_t(t) < token_edges_.size();
    unit[r] = known ? run_start(token_edges_[last_token_], token_edges_[t], opts_.params.units, last_unit_, at) : at;
    last_token_ = t;
    last_unit_ = unit[r];
  }
  for (int l = 0; l < kv_.n_layers(); ++l)
    for (int h = 0; h < cfg_.n_head_kv; ++h)
      for (int r = 0; r < n; ++r) {
        const size_t i = at(l, h, s0 + r);
        nuc_[i] = r == 0 ? pending_nuc_ : (nll.empty() ? kNoScore : nll[r - 1]);
        source_[i] = stream_pos_ + r;
        unit_[i] = unit[r];
        position_[i] = p0 + r;
      }
  pending_nuc_ = nll.empty() ? kNoScore : nll[n - 1];
  stream_pos_ += n;
  if (!decoding_) stats_.tokens_read += n;
  stats_.max_position = std::max(stats_.max_position, p0 + n - 1);
}

void MemoryPot::read(const std::vector<TokenId>& tokens, TokenId next, int still_to_come) {
  size_t i = 0;
  while (i < tokens.size()) {
    const bool rest_fits = static_cast<long long>(tokens.size() - i) + still_to_come <= kv_.free_slots();
    const int reserve = rest_fits ? 0 : static_cast<int>(catalyst_.size());
    int room = kv_.free_slots() - reserve;
    if (room <= 0) {
      distill();
      room = kv_.free_slots() - reserve;
      if (room <= 0) throw std::logic_error("memory pot: a distillation freed no room");
    }
    const int n = static_cast<int>(std::min<size_t>({size_t(room), size_t(fwd_.max_chunk()), tokens.size() - i}));
    // The chunk that fills the room distills next: its forward pass runs the catalyst too,
    // so CaP costs its rows' share of a chunk instead of a forward pass of its own. Not with
    // sliding-window layers, whose store would have to take the catalyst back mid-chunk.
    const bool distills_next = reserve > 0 && n == room && i + n < tokens.size();
    const bool fuse = distills_next && needs_.catalyst && opts_.fuse_catalyst && !cfg_.has_local_layers() &&
                      n + cap_rows() <= fwd_.max_chunk();
    eval_chunk(tokens, i, n, next, true, fuse);
    i += n;
    if (on_chunk_) on_chunk_(static_cast<int>(i));
  }
}

void MemoryPot::finish(const std::vector<TokenId>& tokens, int n) {
  if (n < static_cast<int>(tokens.size())) throw std::logic_error("MemoryPot::finish: n below the tokens given");
  if (kv_.free_slots() < n) distill(opts_.capacity - n);
  if (kv_.free_slots() < n)
    throw SettingError("pot", str(opts_.capacity), ">= " + str(kv_.size() + n),
                       "the pot keeps " + str(kv_.size()) + " entries after distilling; " + str(n) +
                                " more do not fit in {pot} " + str(opts_.capacity));
  for (size_t i = 0; i < tokens.size(); i += fwd_.max_chunk())
    eval_chunk(tokens, i, static_cast<int>(std::min<size_t>(fwd_.max_chunk(), tokens.size() - i)), -1, false);
}

void MemoryPot::append(TokenId token) {
  if (kv_.free_slots() < 1) throw std::logic_error("memory pot: no room for a generated token");
  decoding_ = true;
  eval_chunk({token}, 0, 1, -1, false);
  decoding_ = false;
}

// CaP: the catalyst prompt's attention to every entry (its question rows), then its entries
// are dropped.
void MemoryPot::measure_catalyst() {
  const int size = kv_.size(), next_position = kv_.next_position();
  ctx_.fill_zero(mass_, mass_.bytes());
  const int rows = cap_rows();
  // Sliding-window layers: the catalyst must not slide their store, so it can be taken back.
  fwd_.reserve_window(rows);
  for (size_t i = 0; i < size_t(rows); i += fwd_.max_chunk()) {
    const size_t n = std::min<size_t>(fwd_.max_chunk(), size_t(rows) - i);
    EvalOptions eo;
    eo.mass = &mass_;
    eo.mass_to_row = static_cast<int>(n);
    fwd_.eval(std::vector<TokenId>(catalyst_.begin() + i, catalyst_.begin() + i + n), eo);
  }
  kv_.set_size(size, next_position);
  fwd_.rewind_window(rows);
}

std::vector<float> MemoryPot::catalyst_attention() {
  if (catalyst_.empty() || kv_.free_slots() < static_cast<int>(catalyst_.size())) return {};
  std::vector<float> saved(mass_.bytes() / sizeof(float)), mass(saved.size());
  ctx_.read(mass_, saved.data(), mass_.bytes());  // a fused chunk's measure, which the next distillation reads
  measure_catalyst();
  ctx_.read(mass_, mass.data(), mass_.bytes());
  ctx_.write(mass_, saved.data(), mass_.bytes());
  return mass;
}

// TOVA: the last token read is run again in its own slot (same key and value, same position)
// with its attention measured.
void MemoryPot::measure_last_query() {
  ctx_.fill_zero(mass_, mass_.bytes());
  if (last_token_ < 0 || kv_.size() == 0) return;
  kv_.set_size(kv_.size() - 1, kv_.next_position() - 1);
  fwd_.rewind_window(1);
  EvalOptions eo;
  eo.mass = &mass_;
  fwd_.eval({last_token_}, eo);
}

template <typename T>
void MemoryPot::carry(std::vector<T>& record, int layer, const std::vector<int>& survivors, int keep, const std::vector<int>* add) {
  const int cap = opts_.capacity;
  std::vector<T> tmp(keep);
  for (int h = 0; h < cfg_.n_head_kv; ++h) {
    const int* keep_h = survivors.data() + size_t(h) * keep;
    const size_t row = at(layer, h, 0);
    for (int j = 0; j < keep; ++j) tmp[j] = record[row + keep_h[j]] + (add ? T((*add)[size_t(h) * cap + j]) : T(0));
    std::copy(tmp.begin(), tmp.end(), record.begin() + row);
  }
}

std::vector<int> MemoryPot::choose_on_device(const PotScores& sc, const ChoicePlan& plan) {
  const size_t bytes = nuc_.size() * sizeof(float);
  DeviceScores ds;
  ds.n_layers = sc.n_layers;
  ds.n_heads = sc.n_heads;
  ds.stride = sc.stride;
  ds.size = sc.size;
  ds.pinned = sc.pinned;
  ds.keep = sc.keep;
  ctx_.write(unit_dev_, unit_.data(), bytes);
  ds.unit = &unit_dev_;
  if (needs_.catalyst) ds.catalyst = &mass_;
  if (needs_.last_query) ds.last_query = &mass_;
  if (needs_.novelty) {
    ctx_.write(nuc_dev_, nuc_.data(), bytes);
    ds.novelty = &nuc_dev_;
  }
  if (needs_.accumulated) {
    ctx_.write(acc_dev_, acc_.data(), bytes);
    ds.accumulated = &acc_dev_;
  }
  std::vector<DeviceStage> stages;
  for (const PlanStage& st : plan.stages) {
    const cl::Buffer* b = st.measure == Measure::Catalyst      ? ds.catalyst
                          : st.measure == Measure::Novelty     ? ds.novelty
                          : st.measure == Measure::Accumulated ? ds.accumulated
                                                               : ds.last_query;
    if (!b) throw std::logic_error("MemoryPot: a plan stage reads a measurement the pot did not take");
    stages.push_back({b, st.count});
  }
  choice_->choose(ds, stages, plan.shape, survivors_dev_);
  // Every member of a group holds the same list: read one row per group, copy it to the rest.
  const int L = sc.n_layers, H = sc.n_heads, keep = sc.keep;
  std::vector<int> all(size_t(L) * H * keep), row(keep);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      int* dst = all.data() + (size_t(l) * H + h) * keep;
      const int l0 = plan.shape.per_layer ? l : 0, h0 = plan.shape.per_head ? h : 0;
      if (l == l0 && h == h0) ctx_.read(survivors_dev_, dst, keep * sizeof(int), (size_t(l) * H + h) * keep * sizeof(int));
      else std::copy_n(all.data() + (size_t(l0) * H + h0) * keep, keep, dst);
    }
  return all;
}

std::vector<int> MemoryPot::new_positions(const std::vector<int>& survivors, int keep, int* next_position) const {
  const int L = kv_.n_layers(), H = cfg_.n_head_kv;
  const int room = opts_.capacity - keep + static_cast<int>(catalyst_.size());
  // The positions to start from: as read, or for gaps with every cut shrunk to opts_.position_gap
  // (then placed like fit's). Survivors come in slot order, and positions grow with the slot.
  const bool gaps = opts_.positions == PositionRule::Gaps;
  std::vector<int> out(size_t(L) * H * keep), old(keep);
  int from_next = gaps ? 0 : kv_.next_position();
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      const int* s = survivors.data() + (size_t(l) * H + h) * keep;
      int* dst = out.data() + (size_t(l) * H + h) * keep;
      for (int j = 0; j < keep; ++j) old[j] = position_[at(l, h, s[j])];
      if (!gaps) {
        std::copy(old.begin(), old.end(), dst);
        continue;
      }
      int next = 0;
      const std::vector<int> capped = cap_gaps(old, kv_.next_position(), opts_.position_gap, &next);
      std::copy(capped.begin(), capped.end(), dst);
      from_next = std::max(from_next, next);
    }
  PositionStep step = plan_positions(gaps ? PositionRule::Fit : opts_.positions, from_next, room, cfg_.n_ctx_train, keep);
  if (step.applied == PositionRule::Fit) {  // squeeze; one that cannot stay below step.next resets
    int highest = -1;
    for (size_t i = 0; i < out.size(); i += keep) {
      old.assign(out.begin() + i, out.begin() + i + keep);
      const std::vector<int> squeezed = squeeze_positions(old, step.scale);
      std::copy(squeezed.begin(), squeezed.end(), out.begin() + i);
      highest = std::max(highest, squeezed.back());
    }
    if (highest >= step.next) step = {PositionRule::Reset, 1.0, keep};
  }
  if (step.applied == PositionRule::Reset)
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int>(i % keep);
  *next_position = step.next;
  return out;
}

int MemoryPot::keep_floor() const {
  return opts_.keep_auto ? std::clamp(opts_.capacity / 4, pinned_ + 1, opts_.keep) : opts_.keep;
}

void MemoryPot::distill(int most) {
  const int size = kv_.size();
  most = most > 0 ? std::min(most, opts_.keep) : opts_.keep;
  if (size <= (opts_.keep_auto ? keep_floor() : opts_.keep)) return;
  const int Hkv = cfg_.n_head_kv, cap = opts_.capacity;

  trace::Span cycle_span("ccd", "distillation", {{"cycle", stats_.cycles + 1}, {"entries", size}});
  // 1. Measure what the policy needs (NuC was scored while reading).
  const auto t0 = Clock::now();
  std::vector<float> mass;
  {
    trace::Span span("ccd", needs_.catalyst ? "CaP (catalyst attention)" : "measure (last query)");
    if (needs_.catalyst && !cap_measured_) measure_catalyst();
    cap_measured_ = false;
    if (needs_.last_query) measure_last_query();
    trace::sync(ctx_.queue());
  }
  if (needs_.catalyst || needs_.last_query) stats_.catalyst_s += seconds_since(t0);
  const bool on_device = choice_ && oracle_.first < 0;
  if ((needs_.catalyst || needs_.last_query) && (!on_device || opts_.keep_auto)) {
    mass.resize(mass_.bytes() / sizeof(float));
    ctx_.read(mass_, mass.data(), mass_.bytes());
  }
  if (needs_.accumulated) {  // the new attention since the last cycle joins what survivors carry
    mass.resize(mass_.bytes() / sizeof(float));
    ctx_.read(mass_, mass.data(), mass_.bytes());
    for (size_t i = 0; i < mass.size(); ++i) acc_[i] += mass[i];
    ctx_.fill_zero(mass_, mass_.bytes());
  }

  // 2. Selection.
  const auto t1 = Clock::now();
  PotScores sc;
  sc.n_layers = kv_.n_layers();
  sc.n_heads = Hkv;
  sc.stride = cap;
  sc.size = size;
  sc.pinned = pinned_;
  sc.keep = std::min(opts_.keep, size);
  sc.catalyst = needs_.catalyst ? mass.data() : nullptr;
  sc.last_query = needs_.last_query ? mass.data() : nullptr;
  sc.accumulated = needs_.accumulated ? acc_.data() : nullptr;
  sc.novelty = needs_.novelty ? nuc_.data() : nullptr;
  sc.source = source_.data();
  sc.unit = unit_.data();
  sc.oracle_first = oracle_.first;
  sc.oracle_last = oracle_.second;
  if (opts_.keep_auto) {  // as many as the scores justify; the plan's counts follow the choice
    const int least = std::min(keep_floor(), most);
    sc.keep = std::min(size, keep_by_mass(sc, policy_->plan(sc), opts_.keep_mass, least, most));
  }
  const int keep = sc.keep;
  std::vector<int> all;
  {
    trace::Span span("ccd", "selection", {{"on_device", on_device}, {"keep", keep}});
    all = on_device ? choose_on_device(sc, policy_->plan(sc)) : policy_->select(sc);
  }

  // 3. The kept entries' new positions (pot/positions.h), one decision for every layer.
  int next_position = 0;
  const std::vector<int> moved = new_positions(all, keep, &next_position);  // [L][Hkv][keep]

  // 4-5. Compaction and re-rotation (CR-RoPE), layer by layer.
  std::vector<int> delta(size_t(Hkv) * cap, 0);
  bool any_moved = false;
  for (int l = 0; l < kv_.n_layers(); ++l) {
    const auto layer_block = all.begin() + size_t(l) * Hkv * keep;  // [Hkv][keep]
    const std::vector<int> survivors(layer_block, layer_block + size_t(Hkv) * keep);
    {
      trace::Span span("ccd", "compaction", {{"layer", l}});
      kv_.compact(l, survivors, keep);
      trace::sync(ctx_.queue());
    }
    bool layer_moved = false;
    for (int h = 0; h < Hkv; ++h)
      for (int j = 0; j < keep; ++j) {
        const size_t i = size_t(h) * keep + j;
        int& d = delta[size_t(h) * cap + j];
        d = moved[size_t(l) * Hkv * keep + i] - position_[at(l, h, survivors[i])];
        layer_moved = layer_moved || d != 0;
      }
    any_moved = any_moved || layer_moved;
    carry(nuc_, l, survivors, keep);
    carry(source_, l, survivors, keep);
    carry(unit_, l, survivors, keep);
    carry(position_, l, survivors, keep, &delta);
    if (!acc_.empty()) {  // H2O: survivors carry their sums; the freed slots start from nothing
      carry(acc_, l, survivors, keep);
      for (int h = 0; h < Hkv; ++h) std::fill(acc_.begin() + at(l, h, keep), acc_.begin() + at(l, h, cap), 0.0f);
    }
    if (layer_moved) {
      trace::Span span("ccd", "re-rotation (CR-RoPE)", {{"layer", l}});
      kv_.rerotate(l, delta);
      trace::sync(ctx_.queue());
    }
  }
  ctx_.finish();  // the layers' compactions and rotations were only enqueued
  // reset: the pot's positions are 0 .. keep-1 again, the next token takes position keep.
  kv_.set_size(keep, next_position);
  if (any_moved) ++stats_.repositioned;
  stats_.compact_s += seconds_since(t1);
  stats_.kept_total += keep;
  stats_.kept_least = stats_.cycles == 0 ? keep : std::min(stats_.kept_least, keep);
  stats_.kept_most = std::max(stats_.kept_most, keep);
  ++stats_.cycles;
}

}  // namespace infinipot
