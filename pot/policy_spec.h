// A policy and its settings as one line of text: "name" or "name:key=value:key=value"
// ("infinipot:pot=1024:pool=2", "h2o:pot=2048:keep=512", "full"). The one parser of that
// text: nih's --policy lists use it, and so can every other job that names a policy. The
// keys are the registry's settings (pot/policy_registry.h); one the policy does not read is
// refused (SettingNotRead), as is a malformed value.
#pragma once
#include <string>

#include "pot/memory_pot.h"
#include "pot/policy_registry.h"

namespace infinipot {

struct PolicySpec {
  std::string name;
  int pot = 0;             // KV entries of the pot (0 for a policy that keeps none)
  int keep = 0;            // 0: the pot's default
  bool keep_auto = false;  // keep=auto: each distillation keeps what its scores justify (PotOptions)
  float keep_mass = PotOptions::kDefaultKeepMass;  // keep_mass=S: the share of the mass keep=auto holds
  int ctx = 0;             // a full cache's entries (0: the prompt and its answer)
  float nuc_ratio = 0.5f;
  int nuc_stride = 1;      // NuC scores every nuc_stride-th token
  int pool = -1;           // -1: the policy's default
  int recent = -1;         // -1: the policy's default
  int ahead = -1;          // pool_ahead; -1: the policy's default
  // Ablations of the span rule (pot/policy.h PolicyParams) and diagnostics:
  bool per_head = false, per_layer = false;
  UnitRule units = UnitRule::Word;  // word (the default) is left out of config()
  bool cap_all_rows = false;  // CaP from every catalyst row, not just the question's
  bool oracle = false;        // the pot keeps the watched text whatever the policy chooses (diagnostics)
  // Ablations of CCD (paper, Tables 2 and 4): cr_rope=0 (positions=stream) keeps the stream
  // positions after a distillation, positions=fit squeezes them only past the model's trained
  // context (pot/positions.h); catalyst=general asks the general summarise prompt (CaP-G)
  // instead of the question (CaP-Q).
  PositionRule positions = PositionRule::Auto;  // auto: the model's rule (resolve_positions)
  int gap = 0;  // positions=gaps: the widest cut (gap=G; 0: PotOptions' default)
  bool general_catalyst = false;
  unsigned given = 0;  // bit(Setting) of the settings the text itself gave

  // Canonical text of the policy and the settings that shape it: "full",
  // "infinipot:pot=1024", "h2o:pot=2048:keep=512". Settings at their defaults are left out.
  std::string config() const;
  const PolicyInfo& info() const { return find_policy(name); }
  bool holds_pot() const { return info().accepts(Setting::Pot); }
  // The pot's options these settings make (policy, size, keep, params, positions).
  PotOptions options() const;
};

// Parses one entry; default_pot / default_keep stand for pot= / keep= when the entry gives
// none (and are dropped for a policy that does not read them). Throws std::invalid_argument
// ("entry 'h2o:size=3': unknown setting 'size' (known: ...)"), SettingNotRead for a key the
// policy does not read, or find_policy's error for an unknown name.
// default_keep kKeepAuto stands for keep=auto.
constexpr int kKeepAuto = -1;
PolicySpec parse_policy_spec(const std::string& entry, int default_pot = 0, int default_keep = 0);

}  // namespace infinipot
