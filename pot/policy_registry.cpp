#include "pot/policy_registry.h"

#include <stdexcept>

namespace infinipot {
namespace {

constexpr unsigned kPotSettings = bit(Setting::Pot) | bit(Setting::Keep) | bit(Setting::Positions) | bit(Setting::Inspect);
constexpr unsigned kSpan = bit(Setting::Pool) | bit(Setting::Ahead) | bit(Setting::Recent) | bit(Setting::Units);
constexpr unsigned kCatalyst = bit(Setting::Catalyst) | bit(Setting::CapRows);
constexpr unsigned kCcd =
    kPotSettings | kSpan | kCatalyst | bit(Setting::NucRatio) | bit(Setting::NucStride) | bit(Setting::Heads) |
    bit(Setting::Layers);
constexpr unsigned kNeedsPot = bit(Setting::Pot);

std::deque<PolicyInfo>& table() {
  static std::deque<PolicyInfo> rows = {
      {"infinipot", &reading_through_pot(), kCcd, kNeedsPot,
       "InfiniPot CCD: CaP (catalyst attention) + NuC (novelty), whole word/digit runs, one choice for all layers",
       make_infinipot_policy},
      {"cap", &reading_through_pot(), kCcd & ~(bit(Setting::NucRatio) | bit(Setting::NucStride)), kNeedsPot,
       "CCD with catalyst attention only ({nuc_ratio} 0)", make_cap_policy},
      {"nuc", &reading_through_pot(), kPotSettings | kSpan | bit(Setting::NucStride), kNeedsPot, "CCD with novelty only (SirLLM-like token entropy)",
       make_nuc_policy},
      {"tova", &reading_through_pot(), kPotSettings | bit(Setting::Heads), kNeedsPot,
       "TOVA: attention of the last token read, per layer", make_tova_policy},
      {"h2o", &reading_through_pot(), kPotSettings | bit(Setting::Recent), kNeedsPot,
       "H2O: accumulated attention heavy hitters per head + a recent window", make_h2o_policy},
      {"streaming", &reading_through_pot(), kPotSettings, kNeedsPot,
       "StreamingLLM: 4 attention-sink tokens + the most recent", make_streaming_policy},
      {"swa", &reading_through_pot(), kPotSettings, kNeedsPot, "sliding window: the most recent entries only",
       make_swa_policy},
      {"truncate", &reading_through_pot(), kPotSettings, kNeedsPot,
       "LongBench truncation: the first half + the last half of the input", make_truncate_policy},
      {"snapkv", &reading_whole_input(), (kPotSettings & ~bit(Setting::Keep)) | bit(Setting::Pool) | kCatalyst, kNeedsPot,
       "SnapKV (memory-unconstrained): whole input in memory, observation-window attention, pooled, per head",
       make_snapkv_policy},
      {"full", &reading_full_cache(), bit(Setting::Ctx), 0, "no pot: a KV cache that holds the whole input", nullptr},
  };
  return rows;
}

}  // namespace

const std::vector<SettingInfo>& settings() {
  static const std::vector<SettingInfo> rows = {
      {Setting::Pot, "pot", "KV entries of the pot (what a whole-input policy keeps)"},
      {Setting::Keep, "keep", "entries left after a distillation, the chat prefix included (auto: as many as the scores justify; keep_mass=S the share of their mass kept)"},
      {Setting::Ctx, "ctx", "KV entries of a full cache"},
      {Setting::NucRatio, "nuc_ratio", "share of the free places chosen by novelty (NuC) before CaP"},
      {Setting::NucStride, "nuc_stride", "NuC scores every Nth token; the span rule carries it to those between"},
      {Setting::Pool, "pool", "an entry takes the best score of the entries up to this many slots before it"},
      {Setting::Ahead, "ahead", "... and up to this many slots after it"},
      {Setting::Recent, "recent", "newest entries always kept"},
      {Setting::Heads, "heads", "per-head: each KV head chooses its own entries"},
      {Setting::Layers, "layers", "per-layer: each layer chooses its own entries"},
      {Setting::Units, "units", "what is kept or dropped together (word, plain, alnum, token)"},
      {Setting::Catalyst, "catalyst", "the text the catalyst prompt asks"},
      {Setting::CapRows, "cap_rows", "which catalyst rows' attention CaP counts (question, all)"},
      {Setting::Positions, "positions", "where kept entries' RoPE positions go (reset, stream, fit, gaps, auto)"},
      {Setting::Inspect, "oracle", "diagnostics of the pot: an oracle span, watched text, its text, snapshots"},
  };
  return rows;
}

const SettingInfo& setting_info(Setting s) {
  for (const auto& row : settings())
    if (row.setting == s) return row;
  throw std::logic_error("setting_info: a Setting without a row");
}

const std::deque<PolicyInfo>& policies() { return table(); }

std::string policy_names(const char* separator) {
  std::string out;
  for (const auto& p : policies()) out += (out.empty() ? "" : separator) + std::string(p.name);
  return out;
}

const PolicyInfo& find_policy(const std::string& name) {
  for (const auto& p : policies())
    if (name == p.name) return p;
  throw SettingError("policy", name, policy_names(), "{policy} must be one of " + policy_names() + "; got '" + name + "'");
}

void register_policy(const PolicyInfo& info) {
  if (!info.name || !*info.name || !info.reading || !info.summary)
    throw std::invalid_argument("register_policy: a row needs a name, a reading and a summary");
  for (const auto& p : policies())
    if (std::string(p.name) == info.name)
      throw std::invalid_argument("register_policy: a policy named '" + std::string(info.name) + "' exists");
  table().push_back(info);
}

const char* default_policy(bool with_pot) { return with_pot ? "infinipot" : "full"; }

SettingNotRead::SettingNotRead(const PolicyInfo& p, Setting s, const std::string& key)
    : SettingError("policy", p.name, "", std::string(p.name) + ": " + (key.empty() ? std::string(setting_info(s).key) : key) +
                            " does not apply to it (" + p.summary + "); drop it"),
      policy(p),
      setting(s) {}

}  // namespace infinipot
