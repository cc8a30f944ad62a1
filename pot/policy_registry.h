// The pot policies by name: the one place that knows them all. Adding a policy is one file in
// pot/policies/, one line in policy_registry.cpp and a test.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "pot/policy.h"

namespace infinipot {

// Which PolicyParams a policy reads (a flag for one it ignores is refused as a usage error).
enum PolicyParam : unsigned {
  kParamNucRatio = 1u << 0,
  kParamPool = 1u << 1,
  kParamRecent = 1u << 2,
  kParamPerHead = 1u << 3,
  kParamPerLayer = 1u << 4,
  kParamUnits = 1u << 5,
  kParamCatalyst = 1u << 6,  // --catalyst: the text the catalyst prompt asks
  kParamPoolAhead = 1u << 7,
};

struct PolicyInfo {
  const char* name;
  Residency residency;
  unsigned params;       // PolicyParam bits it reads
  const char* summary;   // one line for --help and docs
  std::unique_ptr<PotPolicy> (*make)(const PolicyParams&);  // null for full (no pot)
};

const std::vector<PolicyInfo>& policies();
// Throws std::invalid_argument naming the known policies.
const PolicyInfo& find_policy(const std::string& name);
std::string policy_names(const char* separator = ", ");

// Factories, one per file in pot/policies/.
std::unique_ptr<PotPolicy> make_infinipot_policy(const PolicyParams& p);
std::unique_ptr<PotPolicy> make_cap_policy(const PolicyParams& p);
std::unique_ptr<PotPolicy> make_nuc_policy(const PolicyParams& p);
std::unique_ptr<PotPolicy> make_tova_policy(const PolicyParams& p);
std::unique_ptr<PotPolicy> make_h2o_policy(const PolicyParams& p);
std::unique_ptr<PotPolicy> make_streaming_policy(const PolicyParams& p);
std::unique_ptr<PotPolicy> make_swa_policy(const PolicyParams& p);
std::unique_ptr<PotPolicy> make_truncate_policy(const PolicyParams& p);
std::unique_ptr<PotPolicy> make_snapkv_policy(const PolicyParams& p);

}  // namespace infinipot
