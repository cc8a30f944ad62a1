#include "pot/policy_spec.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "model_loader/setting_names.h"

namespace infinipot {
namespace {

bool digits_only(const std::string& v, long long& out) {
  if (v.empty() || v.size() > 18 || !std::all_of(v.begin(), v.end(), [](char c) { return std::isdigit((unsigned char)c); }))
    return false;
  out = std::stoll(v);
  return true;
}

std::string short_float(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string known_keys() {
  std::string out;
  for (const auto& s : settings()) out += (out.empty() ? "" : ", ") + std::string(s.key);
  return out + ", cr_rope, gap, keep_mass";  // cr_rope and gap are forms of positions, keep_mass of keep
}

const Setting* setting_of(const std::string& key) {
  static const std::map<std::string, Setting> aliases = {{"cr_rope", Setting::Positions}, {"gap", Setting::Positions},
                                                                {"keep_mass", Setting::Keep}};
  for (const auto& s : settings())
    if (key == s.key) return &s.setting;
  const auto it = aliases.find(key);
  return it == aliases.end() ? nullptr : &it->second;
}

}  // namespace

std::string PolicySpec::config() const {
  if (!holds_pot()) return ctx > 0 ? name + ":ctx=" + std::to_string(ctx) : name;
  std::string s = name + ":pot=" + std::to_string(pot);
  if (keep_auto) s += ":keep=auto";
  else if (keep > 0) s += ":keep=" + std::to_string(keep);
  if (keep_auto && keep_mass != PotOptions::kDefaultKeepMass) s += ":keep_mass=" + short_float(keep_mass);
  if (nuc_ratio != 0.5f) s += ":nuc_ratio=" + short_float(nuc_ratio);
  if (nuc_stride != 1) s += ":nuc_stride=" + std::to_string(nuc_stride);
  if (pool >= 0) s += ":pool=" + std::to_string(pool);
  if (recent >= 0) s += ":recent=" + std::to_string(recent);
  if (ahead >= 0) s += ":ahead=" + std::to_string(ahead);
  if (per_head) s += ":heads=per-head";
  if (per_layer) s += ":layers=per-layer";
  if (units != UnitRule::Word) s += std::string(":units=") + unit_rule_name(units);
  if (cap_all_rows) s += ":cap_rows=all";
  if (general_catalyst) s += ":catalyst=general";
  // Reset (CR-RoPE) is what a config without a rule has always meant, on every model; `auto`
  // is named by what it resolves to, so a label never depends on the model.
  if (positions == PositionRule::Stream) s += ":cr_rope=0";  // the name older records carry
  else if (positions == PositionRule::Fit || positions == PositionRule::Gaps)
    s += std::string(":positions=") + position_rule_name(positions);
  if (gap > 0) s += ":gap=" + std::to_string(gap);
  if (oracle) s += ":oracle=1";
  return s;
}

PotOptions PolicySpec::options() const {
  PotOptions o;
  o.policy = name;
  o.capacity = pot;
  o.keep = keep;
  o.keep_auto = keep_auto;
  o.keep_mass = keep_mass;
  o.params.nuc_ratio = nuc_ratio;
  o.params.nuc_stride = nuc_stride;
  o.params.pool = pool;
  o.params.recent = recent;
  o.params.pool_ahead = ahead;
  o.params.per_head = per_head;
  o.params.per_layer = per_layer;
  o.params.units = units;
  o.cap_question_rows = !cap_all_rows;
  o.positions = positions;
  if (gap > 0) o.position_gap = gap;
  return o;
}

PolicySpec parse_policy_spec(const std::string& entry, int default_pot, int default_keep) {
  std::vector<std::string> parts;
  {
    std::stringstream in(entry);
    for (std::string part; std::getline(in, part, ':');) parts.push_back(part);
    if (entry.empty() || entry.back() == ':') parts.push_back("");
  }
  PolicySpec p;
  bool mass_given = false, keep_given = false;
  p.name = parts[0];
  if (p.name.empty() || !std::all_of(p.name.begin(), p.name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      }))
    throw SettingError("policy", entry, "", "entry '" + entry + "' does not start with a policy name");
  const PolicyInfo& info = find_policy(p.name);
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    if (eq == std::string::npos) throw SettingError("policy", entry, "", "entry '" + entry + "': '" + parts[i] + "' is not key=value");
    std::string k = parts[i].substr(0, eq);
    const std::string v = parts[i].substr(eq + 1);
    std::replace(k.begin(), k.end(), '-', '_');
    const Setting* setting = setting_of(k);
    if (!setting)
      throw SettingError("policy", entry, "", "entry '" + entry + "': unknown setting '" + k + "' (known: " + known_keys() + ")");
    if (!info.accepts(*setting)) throw SettingNotRead(info, *setting, k);
    p.given |= bit(*setting);
    long long n = 0;
    auto bad = [&](const std::string& what) {
      return SettingError("policy", entry, what, "entry '" + entry + "': " + k + "=" + v + " is not " + what);
    };
    auto count = [&](long long most, const std::string& what, long long least = 0) {
      if (!digits_only(v, n) || n < least || n > most) throw bad(what);
      return static_cast<int>(n);
    };
    if (k == "pot") p.pot = count(1 << 24, "a pot size in 1..16777216", 1);
    else if (k == "keep") {
      keep_given = true;
      p.keep_auto = v == "auto";
      p.keep = p.keep_auto ? 0 : count(1 << 24, "a count of entries >= 1 or auto", 1);
    }
    else if (k == "keep_mass") {
      char* end = nullptr;
      const double r = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(r > 0.0 && r <= 1.0)) throw bad("a share in (0, 1]");
      p.keep_mass = static_cast<float>(r);
      mass_given = true;
    }
    else if (k == "ctx") p.ctx = count(1 << 24, "a count of entries >= 1", 1);
    else if (k == "pool") p.pool = count(64, "a pooling radius in 0..64");
    else if (k == "nuc_stride") p.nuc_stride = count(PolicyParams::kMaxNucStride, "a stride in 1.." + std::to_string(PolicyParams::kMaxNucStride), 1);
    else if (k == "recent") p.recent = count(1 << 24, "a count of recent entries >= 0");
    else if (k == "ahead") p.ahead = count(64, "a pooling reach in 0..64");
    else if (k == "gap") p.gap = count(1 << 24, "a distance of at least 1", 1);
    else if (k == "units") {
      const auto rule = parse_unit_rule(v);
      if (!rule) throw bad("word, plain, alnum or token");
      p.units = *rule;
    } else if (k == "cr_rope") {
      // The paper's ablation is the off value (written cr_rope=0, as older records have it);
      // cr_rope=1 is positions=reset, left out of the config.
      if (v != "0" && v != "1") throw bad("0 or 1");
      p.positions = v == "1" ? PositionRule::Reset : PositionRule::Stream;
    } else if (k == "positions") {
      const auto rule = parse_position_rule(v);
      if (!rule) throw bad("reset, stream, fit, gaps or auto");
      p.positions = *rule;
    } else if (k == "nuc_ratio") {
      char* end = nullptr;
      const double r = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(r >= 0.0 && r <= 1.0)) throw bad("a share in [0, 1]");
      p.nuc_ratio = static_cast<float>(r);
    } else {  // the two-valued settings: on value, off value, field
      const std::map<std::string, std::tuple<std::string, std::string, bool*>> choice = {
          {"heads", {"per-head", "shared", &p.per_head}},      {"layers", {"per-layer", "shared", &p.per_layer}},
          {"cap_rows", {"all", "question", &p.cap_all_rows}},  {"catalyst", {"general", "question", &p.general_catalyst}},
          {"oracle", {"1", "0", &p.oracle}}};
      const auto& [on, off, field] = choice.at(k);
      if (v != on && v != off) throw bad(on + " or " + off);
      *field = v == on;
    }
  }
  if (p.gap > 0 && p.positions != PositionRule::Gaps)
    throw SettingError("policy", entry, "", "entry '" + entry + "': gap sets how wide positions=gaps leaves a cut; "
                                "add positions=gaps or drop gap");
  if (p.gap == kDefaultPositionGap) p.gap = 0;  // the default, left out of the config
  if (!(p.given & bit(Setting::Pot))) p.pot = info.accepts(Setting::Pot) ? default_pot : 0;
  if (!keep_given && info.accepts(Setting::Keep)) {
    p.keep = default_keep == kKeepAuto ? 0 : default_keep;
    p.keep_auto = default_keep == kKeepAuto;
  }
  if (mass_given && !p.keep_auto)
    throw SettingError("policy", entry, "", "entry '" + entry + "': keep_mass sets what keep=auto holds; add keep=auto or drop keep_mass");
  if (info.requires_setting(Setting::Pot) && p.pot <= 0)
    throw SettingError("policy", entry, "", "entry '" + entry + "' needs a pot size (pot=N)");
  if (p.keep > 0 && p.keep >= p.pot)
    throw SettingError("policy", entry, "", "entry '" + entry + "': keep (" + std::to_string(p.keep) +
                                ") must be below the pot's size (" + std::to_string(p.pot) + "); lower keep or raise pot");
  return p;
}

}  // namespace infinipot
