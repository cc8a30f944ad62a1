// The pot policies by name: the one place that knows them all. Adding a policy is one file in
// pot/policies/ and one row in policy_registry.cpp (or register_policy, as a test does).
// Each row says how the policy holds the input (pot/reading.h) and which settings it reads
// (the table below); callers ask the row, never the name.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "model_loader/setting_names.h"
#include "pot/policy.h"
#include "pot/reading.h"

namespace infinipot {

// The settings that shape how a policy reads, by the names the API and `--policy
// NAME:key=value` use. A setting given to a policy that does not read it is refused.
enum class Setting : unsigned {
  Pot,        // pot: the pot's size N (the entries a whole-input policy keeps)
  Keep,       // keep: entries left after a distillation
  Ctx,        // ctx: a full cache's entries
  NucRatio,   // nuc_ratio: NuC's share of the free places
  NucStride,  // nuc_stride: NuC scores every nuc_stride-th token
  Pool,       // pool: an entry takes the best score up to this many slots before it
  Ahead,      // ahead: ... and up to this many after it
  Recent,     // recent: newest entries always kept
  Heads,      // heads: each KV head chooses its own entries
  Layers,     // layers: each layer chooses its own entries
  Units,      // units: what is kept or dropped together
  Catalyst,   // catalyst: the text the catalyst prompt asks (CaP)
  CapRows,    // cap_rows: which catalyst rows' attention counts
  Positions,  // positions: where kept entries' RoPE positions go (and gap, cr_rope)
  Inspect,    // oracle, watch, the pot's text, snapshots, host selection: diagnostics of a pot
};
constexpr unsigned bit(Setting s) { return 1u << static_cast<unsigned>(s); }

struct SettingInfo {
  Setting setting;
  const char* key;  // its name in the API and in --policy NAME:key=value
  const char* doc;  // one line for --help and docs
};
const std::vector<SettingInfo>& settings();
const SettingInfo& setting_info(Setting s);

struct PolicyInfo {
  const char* name;
  const Reading* reading;  // how it holds the input (pot/reading.h)
  unsigned settings;       // bit(Setting) of those it reads
  unsigned required;       // bit(Setting) of those it cannot do without
  const char* summary;     // one line for --help and docs
  std::unique_ptr<PotPolicy> (*make)(const PolicyParams&);  // null: it selects nothing (full)
  bool accepts(Setting s) const { return (settings & bit(s)) != 0; }
  bool requires_setting(Setting s) const { return (required & bit(s)) != 0; }
};

// A deque: a row added by register_policy leaves the others where they are.
const std::deque<PolicyInfo>& policies();
// Throws std::invalid_argument naming the known policies.
const PolicyInfo& find_policy(const std::string& name);
std::string policy_names(const char* separator = ", ");
// Adds a row (a policy defined outside pot/policies/, e.g. by a test); throws
// std::invalid_argument for a name already registered. Not thread-safe: call before use.
void register_policy(const PolicyInfo& info);

// The policy a job gets when it names none: infinipot with a pot, the full cache without.
const char* default_policy(bool with_pot);

// A setting given to a policy that does not read it.
class SettingNotRead : public SettingError {
 public:
  // key: how the setting was named, when not by its own key (cr_rope for positions)
  SettingNotRead(const PolicyInfo& policy, Setting setting, const std::string& key = "");
  const PolicyInfo& policy;
  const Setting setting;
};

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
