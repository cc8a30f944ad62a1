#include "pot/policy_registry.h"

#include <stdexcept>

namespace infinipot {

const std::vector<PolicyInfo>& policies() {
  constexpr unsigned kCcd = kParamNucRatio | kParamPool | kParamPoolAhead | kParamRecent | kParamPerHead |
                            kParamPerLayer | kParamUnits | kParamCatalyst;
  static const std::vector<PolicyInfo> table = {
      {"infinipot", Residency::Pot, kCcd,
       "InfiniPot CCD: CaP (catalyst attention) + NuC (novelty), whole word/digit runs, one choice for all layers",
       make_infinipot_policy},
      {"cap", Residency::Pot, kCcd & ~kParamNucRatio, "CCD with catalyst attention only (--nuc-ratio 0)", make_cap_policy},
      {"nuc", Residency::Pot, kParamPool | kParamPoolAhead | kParamRecent | kParamUnits,
       "CCD with novelty only (SirLLM-like token entropy)", make_nuc_policy},
      {"tova", Residency::Pot, kParamPerHead, "TOVA: attention of the last token read, per layer", make_tova_policy},
      {"h2o", Residency::Pot, kParamRecent, "H2O: accumulated attention heavy hitters per head + a recent window",
       make_h2o_policy},
      {"streaming", Residency::Pot, 0, "StreamingLLM: 4 attention-sink tokens + the most recent", make_streaming_policy},
      {"swa", Residency::Pot, 0, "sliding window: the most recent entries only", make_swa_policy},
      {"truncate", Residency::Pot, 0, "LongBench truncation: the first half + the last half of the input",
       make_truncate_policy},
      {"snapkv", Residency::WholeInput, kParamPool | kParamCatalyst,
       "SnapKV (memory-unconstrained): whole input in memory, observation-window attention, pooled, per head",
       make_snapkv_policy},
      {"full", Residency::FullCache, 0, "no pot: a KV cache that holds the whole input", nullptr},
  };
  return table;
}

std::string policy_names(const char* separator) {
  std::string out;
  for (const auto& p : policies()) out += (out.empty() ? "" : separator) + std::string(p.name);
  return out;
}

const PolicyInfo& find_policy(const std::string& name) {
  for (const auto& p : policies())
    if (name == p.name) return p;
  throw std::invalid_argument("--policy must be one of " + policy_names() + "; got '" + name + "'");
}

}  // namespace infinipot
