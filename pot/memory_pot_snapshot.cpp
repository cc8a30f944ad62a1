// MemoryPot's snapshots: its host records and the K/V of its filled slots (and, for a model
// with sliding-window layers, the forward pass's local store) out to a PotSnapshot, and back
// into a freshly prepared pot of the same model and options.
#include <limits>
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "pot/memory_pot.h"
#include "pot/policy_registry.h"

namespace infinipot {
namespace {

// 'G' (global) or 'L' (sliding-window) per model layer, as PotSnapshot::layer_kinds spells it.
std::string layer_kinds_of(const LlamaConfig& cfg) {
  std::string kinds;
  for (int l = 0; l < cfg.n_layer; ++l) kinds += cfg.is_local(l) ? 'L' : 'G';
  return kinds;
}

// The K/V of slots [0, used) of every layer of a store, appended to out: per layer, keys then
// values, each [n_head_kv][used][head_dim] (the store's buffers are [n_head_kv][capacity][head_dim]).
void read_filled(cl::Context& ctx, KvStore& store, const LlamaConfig& cfg, int used, std::vector<uint8_t>& out) {
  const size_t row = size_t(cfg.head_dim) * (store.half() ? 2 : 4);
  const size_t head_bytes = size_t(store.capacity()) * row, used_bytes = size_t(used) * row;
  std::vector<uint8_t> layer(size_t(cfg.n_head_kv) * head_bytes);
  for (int l = 0; l < store.n_layers(); ++l)
    for (int kv = 0; kv < 2; ++kv) {
      ctx.read(kv == 0 ? store.keys(l) : store.values(l), layer.data(), layer.size());
      for (int h = 0; h < cfg.n_head_kv; ++h)
        out.insert(out.end(), layer.begin() + h * head_bytes, layer.begin() + h * head_bytes + used_bytes);
    }
}

// The inverse: bytes as read_filled wrote them into slots [0, used); the other slots are zeroed.
void write_filled(cl::Context& ctx, KvStore& store, const LlamaConfig& cfg, int used, const std::vector<uint8_t>& in) {
  const size_t row = size_t(cfg.head_dim) * (store.half() ? 2 : 4);
  const size_t head_bytes = size_t(store.capacity()) * row, used_bytes = size_t(used) * row;
  if (in.size() != size_t(store.n_layers()) * 2 * cfg.n_head_kv * used_bytes)
    throw std::logic_error("MemoryPot::restore: K/V bytes do not match the store");  // the caller checked the shape
  std::vector<uint8_t> layer(size_t(cfg.n_head_kv) * head_bytes, 0);
  size_t at = 0;
  for (int l = 0; l < store.n_layers(); ++l)
    for (int kv = 0; kv < 2; ++kv) {
      for (int h = 0; h < cfg.n_head_kv && used_bytes > 0; ++h, at += used_bytes)
        std::memcpy(layer.data() + h * head_bytes, in.data() + at, used_bytes);
      ctx.write(kv == 0 ? store.keys(l) : store.values(l), layer.data(), layer.size());
    }
}

}  // namespace

nlohmann::json MemoryPot::settings_json(const PotOptions& o) {
  return {{"policy", o.policy},
          {"capacity", o.capacity},
          {"keep", o.keep},
          {"keep_auto", o.keep_auto},
          {"keep_mass", o.keep_mass},
          {"cr_rope", o.positions == PositionRule::Reset},
          {"positions", position_rule_name(o.positions)},
          {"position_gap", o.position_gap},
          {"cap_question_rows", o.cap_question_rows},
          {"params",
           {{"nuc_ratio", o.params.nuc_ratio}, {"nuc_stride", o.params.nuc_stride}, {"pool", o.params.pool}, {"pool_ahead", o.params.pool_ahead},
            {"recent", o.params.recent}, {"per_head", o.params.per_head}, {"per_layer", o.params.per_layer},
            {"units", unit_rule_name(o.params.units)}}}};
}

PotOptions MemoryPot::options_from_settings(const nlohmann::json& s) {
  PotOptions o;
  try {
    o.policy = s.at("policy").get<std::string>();
    (void)find_policy(o.policy);
    o.capacity = s.at("capacity").get<int>();
    o.keep = s.at("keep").get<int>();
    o.keep_auto = s.value("keep_auto", false);  // absent before --keep auto: a fixed keep
    o.keep_mass = s.value("keep_mass", PotOptions::kDefaultKeepMass);
    if (o.keep_auto && !(o.keep_mass > 0.0f && o.keep_mass <= 1.0f)) throw std::invalid_argument("keep_mass must lie in (0, 1]");
    // Snapshots before the position rules name only cr_rope (reset or stream).
    if (s.contains("positions")) {
      const auto rule = parse_position_rule(s.at("positions").get<std::string>());
      if (!rule) throw std::invalid_argument("unknown position rule '" + s.at("positions").get<std::string>() + "'");
      o.positions = *rule;
      o.position_gap = s.value("position_gap", o.position_gap);  // absent before the gaps rule
      if (o.position_gap < 1) throw std::invalid_argument("position_gap must be at least 1");
    } else {
      o.positions = s.at("cr_rope").get<bool>() ? PositionRule::Reset : PositionRule::Stream;
    }
    o.cap_question_rows = s.at("cap_question_rows").get<bool>();
    const auto& p = s.at("params");
    o.params.nuc_ratio = p.at("nuc_ratio").get<float>();
    o.params.nuc_stride = p.value("nuc_stride", 1);  // snapshots from before nuc_stride scored every token
    o.params.pool = p.at("pool").get<int>();
    o.params.pool_ahead = p.at("pool_ahead").get<int>();
    o.params.recent = p.at("recent").get<int>();
    o.params.per_head = p.at("per_head").get<bool>();
    o.params.per_layer = p.at("per_layer").get<bool>();
    if (p.contains("units")) {
      const auto rule = parse_unit_rule(p.at("units").get<std::string>());
      if (!rule) throw std::invalid_argument("unknown unit rule '" + p.at("units").get<std::string>() + "'");
      o.params.units = *rule;
    } else {  // older snapshots: two flags, and runs of letters and digits before alnum_units existed
      const bool alnum = p.contains("alnum_units") ? p.at("alnum_units").get<bool>() : true;
      o.params.units = p.at("token_units").get<bool>() ? UnitRule::Token : alnum ? UnitRule::Alnum : UnitRule::Plain;
    }
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("the snapshot's pot settings are unreadable: ") + e.what());
  }
  if (o.capacity < 2 || o.keep < 1 || o.keep >= o.capacity || !(o.params.nuc_ratio >= 0 && o.params.nuc_ratio <= 1))
    throw std::invalid_argument("the snapshot's pot settings are out of range (pot " + std::to_string(o.capacity) +
                                ", keep " + std::to_string(o.keep) + ")");
  return o;
}

PotSnapshot MemoryPot::capture(const std::vector<int>& tokens, const std::string& model_id) const {
  if (decoding_) throw std::logic_error("MemoryPot::capture while decoding");
  if (static_cast<int>(tokens.size()) != stream_pos_)
    throw std::logic_error("MemoryPot::capture: " + std::to_string(tokens.size()) + " tokens for a pot that read " +
                           std::to_string(stream_pos_));
  PotSnapshot s;
  s.model_id = model_id;
  s.settings = settings_json(opts_);
  s.n_layer = kv_.n_layers();  // the global layers: the pot's
  s.layer_kinds = layer_kinds_of(cfg_);
  s.n_head_kv = cfg_.n_head_kv;
  s.head_dim = cfg_.head_dim;
  s.capacity = opts_.capacity;
  s.half = kv_.half();
  s.size = kv_.size();
  s.next_position = kv_.next_position();
  s.pinned = pinned_;
  s.stream_pos = stream_pos_;
  s.last_token = last_token_;
  s.last_unit = last_unit_;
  s.pending_nuc = pending_nuc_;
  s.cycles = stats_.cycles;
  s.max_position = stats_.max_position;
  s.tokens_read = stats_.tokens_read;
  s.kept_total = stats_.kept_total;
  s.kept_least = stats_.kept_least;
  s.kept_most = stats_.kept_most;
  s.nuc = nuc_;
  s.acc = acc_;
  s.source = source_;
  s.unit = unit_;
  s.position = position_;
  // Slots past the filled ones hold what earlier cycles left there: written as a fresh pot
  // holds them, so that two pots in the same state make the same file.
  for (size_t row = 0; row < size_t(s.n_layer) * s.n_head_kv; ++row)
    for (size_t i = row * s.capacity + s.size; i < (row + 1) * s.capacity; ++i) {
      s.nuc[i] = std::numeric_limits<float>::quiet_NaN();  // MemoryPot's "no score yet"
      if (!s.acc.empty()) s.acc[i] = 0;
      s.source[i] = s.unit[i] = -1;
      s.position[i] = 0;
    }
  if (needs_.accumulated) {
    s.mass.resize(mass_.bytes() / sizeof(float));
    ctx_.read(mass_, s.mass.data(), mass_.bytes());
  }
  s.tokens = tokens;
  s.kv.reserve(s.kv_bytes());
  read_filled(ctx_, kv_, cfg_, s.size, s.kv);
  // The sliding-window layers' store: the last window of what was read, which the next
  // tokens attend to in those layers (and through them, in every later layer).
  if (KvStore* w = fwd_.window_store()) {
    if (w->next_position() != w->size())
      throw std::logic_error("MemoryPot::capture: the local store's slots are not its positions");
    s.window_capacity = w->capacity();
    s.window_size = w->size();
    s.window_next_position = w->next_position();
    s.window_kv.reserve(s.window_kv_bytes());
    read_filled(ctx_, *w, cfg_, s.window_size, s.window_kv);
  }
  return s;
}

void MemoryPot::restore(const PotSnapshot& s, const std::vector<TokenId>& catalyst, int question_rows) {
  const std::string kinds = layer_kinds_of(cfg_);
  if (s.layer_kinds != kinds)
    throw std::invalid_argument("the snapshot's layers (" + s.layer_kinds + ", G global, L sliding-window) are not " +
                                "this model's (" + kinds + "): load it with the model it was saved with");
  if (s.n_layer != kv_.n_layers() || s.n_head_kv != cfg_.n_head_kv || s.head_dim != cfg_.head_dim ||
      s.capacity != opts_.capacity || s.half != kv_.half())
    throw std::invalid_argument("the snapshot's shape (" + std::to_string(s.n_layer) + " layers, " +
                                std::to_string(s.n_head_kv) + " KV heads, pot " + std::to_string(s.capacity) + ", " +
                                (s.half ? "f16" : "f32") + ") does not match this pot (" +
                                std::to_string(kv_.n_layers()) + " layers, " + std::to_string(cfg_.n_head_kv) +
                                " KV heads, pot " + std::to_string(opts_.capacity) + ", " +
                                (kv_.half() ? "f16" : "f32") + "): load it with the model and {kv_type} it was saved with");
  KvStore* window = fwd_.window_store();
  // Layer kinds match, so the snapshot has a local store exactly when this model has one.
  if (window && s.window_size > window->capacity())
    throw std::invalid_argument(
        "the snapshot's sliding-window store holds " + std::to_string(s.window_size) + " entries, more than this run's " +
        "holds (window " + std::to_string(cfg_.sliding_window) + " + chunk " + std::to_string(fwd_.max_chunk()) +
        "): load it with {chunk} " + std::to_string(s.window_capacity - cfg_.sliding_window) + " as it was saved with");
  if (needs_.catalyst && catalyst.empty()) throw std::invalid_argument("the " + opts_.policy + " policy needs a catalyst prompt");
  check_catalyst_fits_chunk(cfg_, static_cast<int>(catalyst.size()), fwd_.max_chunk());
  if ((needs_.accumulated && (s.acc.size() != acc_.size() || s.mass.size() * sizeof(float) != mass_.bytes())) ||
      (!needs_.accumulated && (!s.acc.empty() || !s.mass.empty())))
    throw std::invalid_argument("the snapshot's accumulated attention does not fit the " + opts_.policy + " policy");
  if (s.pinned + static_cast<int>(catalyst.size()) + 2 > opts_.capacity)
    throw std::invalid_argument("the pot cannot hold the pinned prefix plus the catalyst prompt");
  kv_.reset();
  // The forward pass restarts its local store when it sees the global store was reset; have
  // it do so now (reserving no room), so the store written below is not wiped by the next eval.
  fwd_.reserve_window(0);
  decoding_ = false;
  cap_measured_ = false;  // a snapshot holds no measure: the next distillation takes its own
  catalyst_ = catalyst;
  question_rows_ = question_rows > 0 && opts_.cap_question_rows ? std::min<int>(question_rows, catalyst.size()) : 0;
  pinned_ = s.pinned;
  stream_pos_ = s.stream_pos;
  last_token_ = s.last_token;
  last_unit_ = s.last_unit;
  pending_nuc_ = s.pending_nuc;
  stats_ = {};
  stats_.cycles = s.cycles;
  stats_.max_position = s.max_position;
  stats_.tokens_read = s.tokens_read;
  stats_.kept_total = s.kept_total;
  stats_.kept_least = s.kept_least;
  stats_.kept_most = s.kept_most;
  nuc_ = s.nuc;
  source_ = s.source;
  unit_ = s.unit;
  position_ = s.position;
  if (needs_.accumulated) {
    acc_ = s.acc;
    ctx_.write(mass_, s.mass.data(), mass_.bytes());
  }
  write_filled(ctx_, kv_, cfg_, s.size, s.kv);
  kv_.set_size(s.size, s.next_position);
  if (window) {
    write_filled(ctx_, *window, cfg_, s.window_size, s.window_kv);
    window->set_size(s.window_size, s.window_next_position);
  }
}

}  // namespace infinipot
