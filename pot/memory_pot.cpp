#include "pot/memory_pot.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "runtime/cl_error.h"

namespace infinipot {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
constexpr float kNoScore = std::numeric_limits<float>::quiet_NaN();
std::string str(long long v) { return std::to_string(v); }

}  // namespace

PotOptions MemoryPot::resolve(PotOptions o, const PotLayout& L) {
  if (o.capacity <= 0) throw std::invalid_argument("--pot must be a positive number of KV entries, got " + str(o.capacity));
  if (!(o.nuc_ratio >= 0.0f && o.nuc_ratio <= 1.0f))
    throw std::invalid_argument("--nuc-ratio must lie in [0, 1], got " + std::to_string(o.nuc_ratio));
  const int M = o.capacity, P = L.pinned, K = L.catalyst;
  // The smallest pot that can distill at all: prefix + one kept entry + catalyst + one new token.
  const int min_pot = P + K + 2;
  if (M < min_pot)
    throw std::invalid_argument("--pot " + str(M) + " cannot hold the chat prefix (" + str(P) + " tokens) plus the catalyst prompt (" +
                                str(K) + " tokens) with room to distill; use --pot " + str(min_pot) +
                                " or more (or a shorter --system / --catalyst)");
  // Default: half the pot, within the range that works (above the prefix, leaving room for
  // the catalyst and one new token), so the minimum pot named above works as it is.
  if (o.keep == 0) o.keep = std::clamp(M / 2, P + 1, M - K - 1);
  if (o.keep >= M)
    throw std::invalid_argument("--keep " + str(o.keep) + " must be below --pot " + str(M) +
                                ": a distillation has to free room for new text");
  if (o.keep <= P)
    throw std::invalid_argument("--keep " + str(o.keep) + " leaves no room for the document: the chat prefix alone pins " +
                                str(P) + " entries; use --keep " + str(P + 1) + " or more");
  if (o.keep + K >= M)
    throw std::invalid_argument("--keep " + str(o.keep) + " plus the catalyst prompt (" + str(K) + " tokens) fills --pot " +
                                str(M) + ": no room to read on; use --keep " + str(M - K - 1) + " or less");
  const bool never_full = static_cast<long long>(P) + L.body + L.final_tokens <= M;
  if (!never_full && o.keep + L.final_tokens > M)
    throw std::invalid_argument("after its last distillation the pot keeps " + str(o.keep) + " entries, and the question, "
                                "template and answer need " + str(L.final_tokens) + " more than --pot " + str(M) +
                                " holds; lower -n or --keep, or raise --pot to " + str(o.keep + L.final_tokens));
  return o;
}

uint64_t MemoryPot::scoring_bytes(const LlamaConfig& cfg, int capacity, bool half) {
  const uint64_t mass = uint64_t(cfg.n_layer) * cfg.n_head_kv * capacity * sizeof(float);
  return mass + KvStore::compaction_bytes(cfg, capacity, half);
}

MemoryPot::MemoryPot(cl::Context& ctx, Forward& forward, KvStore& kv, const LlamaConfig& cfg, const PotOptions& opts)
    : ctx_(ctx), fwd_(forward), kv_(kv), cfg_(cfg), opts_(opts), pending_nuc_(kNoScore) {
  if (opts.capacity != kv.capacity())
    throw std::logic_error("MemoryPot: options capacity differs from the KV store's");
  if (opts.keep <= 0 || opts.keep >= opts.capacity) throw std::logic_error("MemoryPot: resolve() the options first");
  const size_t slots = size_t(cfg.n_layer) * cfg.n_head_kv * opts.capacity;
  mass_ = ctx.memory().alloc(cl::MemCategory::PotScoring, slots * sizeof(float), "pot.cap_mass");
  nuc_.assign(slots, kNoScore);
  source_.assign(slots, -1);
  position_.assign(slots, 0);
}

int MemoryPot::nuc_slots() const {
  return static_cast<int>(std::lround(opts_.nuc_ratio * (opts_.keep - pinned_)));
}

std::vector<int> MemoryPot::sources(int layer, int head) const {
  const auto* p = source_.data() + at(layer, head, 0);
  return std::vector<int>(p, p + kv_.size());
}

void MemoryPot::begin(const std::vector<TokenId>& pinned, const std::vector<TokenId>& catalyst) {
  if (opts_.policy == PotPolicy::InfiniPot && catalyst.empty())
    throw std::invalid_argument("the infinipot policy needs a catalyst prompt");
  kv_.reset();
  stats_ = {};
  decoding_ = false;
  catalyst_ = catalyst;
  stream_pos_ = 0;
  pending_nuc_ = kNoScore;
  pinned_ = static_cast<int>(pinned.size());
  if (pinned_ + static_cast<int>(catalyst.size()) + 2 > opts_.capacity)
    throw std::invalid_argument("the pot cannot hold the pinned prefix plus the catalyst prompt");
  for (size_t i = 0; i < pinned.size(); i += fwd_.max_chunk())
    eval_chunk(pinned, i, static_cast<int>(std::min<size_t>(fwd_.max_chunk(), pinned.size() - i)), -1, false);
}

// Evaluates tokens[from, from+n) into the next slots. With score, every row's NLL of the
// token after it becomes that token's NuC (the last row's waits in pending_nuc_).
void MemoryPot::eval_chunk(const std::vector<TokenId>& tokens, size_t from, int n, TokenId next, bool score) {
  const int s0 = kv_.size();
  const int p0 = kv_.next_position();
  fwd_.eval(std::vector<TokenId>(tokens.begin() + from, tokens.begin() + from + n));
  std::vector<float> nll;
  if (score && opts_.policy == PotPolicy::InfiniPot && opts_.nuc_ratio > 0.0f) {
    const auto t0 = Clock::now();
    std::vector<TokenId> targets(n);
    for (int r = 0; r < n; ++r) targets[r] = from + r + 1 < tokens.size() ? tokens[from + r + 1] : next;
    nll = fwd_.token_nll(targets);
    stats_.novelty_s += seconds_since(t0);
  }
  for (int l = 0; l < cfg_.n_layer; ++l)
    for (int h = 0; h < cfg_.n_head_kv; ++h)
      for (int r = 0; r < n; ++r) {
        const size_t i = at(l, h, s0 + r);
        nuc_[i] = r == 0 ? pending_nuc_ : (nll.empty() ? kNoScore : nll[r - 1]);
        source_[i] = stream_pos_ + r;
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
    eval_chunk(tokens, i, n, next, true);
    i += n;
  }
}

void MemoryPot::finish(const std::vector<TokenId>& tokens, int n) {
  if (n < static_cast<int>(tokens.size())) throw std::logic_error("MemoryPot::finish: n below the tokens given");
  if (kv_.free_slots() < n) distill();
  if (kv_.free_slots() < n)
    throw std::invalid_argument("the pot keeps " + str(kv_.size()) + " entries after distilling; " + str(n) +
                                " more do not fit in --pot " + str(opts_.capacity));
  for (size_t i = 0; i < tokens.size(); i += fwd_.max_chunk())
    eval_chunk(tokens, i, static_cast<int>(std::min<size_t>(fwd_.max_chunk(), tokens.size() - i)), -1, false);
}

void MemoryPot::append(TokenId token) {
  if (kv_.free_slots() < 1) throw std::logic_error("memory pot: no room for a generated token");
  decoding_ = true;
  eval_chunk({token}, 0, 1, -1, false);
  decoding_ = false;
}

void MemoryPot::distill() {
  const int size = kv_.size();
  const int keep = opts_.keep;
  if (size <= keep) return;
  const int Hkv = cfg_.n_head_kv, cap = opts_.capacity;

  // 1. CaP: the catalyst prompt's attention to every entry, then its entries are dropped.
  std::vector<float> mass;
  if (opts_.policy == PotPolicy::InfiniPot) {
    const auto t0 = Clock::now();
    const int next_position = kv_.next_position();
    ctx_.fill_zero(mass_, mass_.bytes());
    EvalOptions eo;
    eo.mass = &mass_;
    eo.mass_from_row = 0;
    for (size_t i = 0; i < catalyst_.size(); i += fwd_.max_chunk()) {
      const size_t n = std::min<size_t>(fwd_.max_chunk(), catalyst_.size() - i);
      fwd_.eval(std::vector<TokenId>(catalyst_.begin() + i, catalyst_.begin() + i + n), eo);
    }
    kv_.set_size(size, next_position);
    mass.resize(mass_.bytes() / sizeof(float));
    ctx_.read(mass_, mass.data(), mass_.bytes());
    stats_.catalyst_s += seconds_since(t0);
  }

  // 2-5. Selection, compaction and CR-RoPE, layer by layer.
  const auto t0 = Clock::now();
  SelectionRequest req;
  req.n_heads = Hkv;
  req.size = size;
  req.pinned = pinned_;
  req.keep = keep;
  req.nuc_slots = opts_.policy == PotPolicy::InfiniPot ? nuc_slots() : 0;
  req.stride = cap;
  req.policy = opts_.policy;
  req.pool = opts_.pool;
  req.shared_heads = opts_.shared_heads;
  std::vector<int> delta(size_t(Hkv) * cap, 0);
  std::vector<float> nuc_row(cap);
  std::vector<int> int_row(cap);
  for (int l = 0; l < cfg_.n_layer; ++l) {
    const size_t base = at(l, 0, 0);
    req.mass = mass.empty() ? nullptr : mass.data() + base;
    req.nuc = nuc_.data() + base;
    const std::vector<int> survivors = select_survivors(req);
    kv_.compact(l, survivors, keep);
    for (int h = 0; h < Hkv; ++h) {
      const int* keep_h = survivors.data() + size_t(h) * keep;
      const size_t row = at(l, h, 0);
      for (int j = 0; j < keep; ++j) {
        const int old_pos = position_[row + keep_h[j]];
        delta[size_t(h) * cap + j] = opts_.cr_rope ? j - old_pos : 0;
      }
      // Carry the host-side bookkeeping along with the entries (positions take the delta).
      auto carry = [&](auto& v, auto& tmp, bool add_delta) {
        for (int j = 0; j < keep; ++j) tmp[j] = v[row + keep_h[j]] + (add_delta ? delta[size_t(h) * cap + j] : 0);
        std::copy(tmp.begin(), tmp.begin() + keep, v.begin() + row);
      };
      carry(nuc_, nuc_row, false);
      carry(source_, int_row, false);
      carry(position_, int_row, true);
    }
    if (opts_.cr_rope) kv_.rerotate(l, delta);
  }
  // CR-RoPE: the pot's positions are 0 .. keep-1 again, the next token takes position keep.
  kv_.set_size(keep, opts_.cr_rope ? keep : kv_.next_position());
  stats_.compact_s += seconds_since(t0);
  ++stats_.cycles;
}

}  // namespace infinipot
