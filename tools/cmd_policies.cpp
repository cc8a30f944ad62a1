// infinipot policies: the registry's table (pot/policy_registry.h) as a user reads it: each
// policy, how it holds the input, the settings it reads (their keys in --policy NAME:key=value
// and in the API) and what it does. docs/pot.md's table is this command's --markdown.
#include <cstdio>
#include <iostream>
#include <memory>

#include "pot/policy_registry.h"
#include "tools/cli_common.h"

namespace infinipot::cli {
namespace {

std::string keys_of(const PolicyInfo& p, bool required) {
  std::string out;
  for (const auto& s : settings())
    if (required ? p.requires_setting(s.setting) : p.accepts(s.setting))
      out += (out.empty() ? "" : ", ") + std::string(s.key);
  return out;
}

}  // namespace

void add_policies_command(CLI::App& app) {
  auto* sub = app.add_subcommand("policies", "List the KV policies, how each holds the input, and the settings it reads");
  auto json = std::make_shared<bool>(false);
  auto markdown = std::make_shared<bool>(false);
  sub->add_flag("--json", *json, "Print one JSON object");
  sub->add_flag("--markdown", *markdown, "Print Markdown tables (docs/pot.md)");
  sub->callback([json, markdown] {
    if (*json && *markdown) throw CLI::ValidationError("--json and --markdown: give one");
    if (*json) {
      nlohmann::json out = {{"policies", nlohmann::json::array()}, {"settings", nlohmann::json::array()}};
      for (const auto& p : policies()) {
        nlohmann::json reads = nlohmann::json::array(), needs = nlohmann::json::array();
        for (const auto& s : settings()) {
          if (p.accepts(s.setting)) reads.push_back(s.key);
          if (p.requires_setting(s.setting)) needs.push_back(s.key);
        }
        out["policies"].push_back({{"name", p.name}, {"reading", p.reading->name()}, {"settings", reads},
                                   {"required", needs}, {"summary", infinipot::worded(p.summary, setting_names())}});
      }
      for (const auto& s : settings()) out["settings"].push_back({{"key", s.key}, {"doc", s.doc}});
      std::cout << out.dump(2) << std::endl;
      return;
    }
    if (*markdown) {
      std::cout << "| policy | reads the input | settings it reads | what it does |\n|---|---|---|---|\n";
      for (const auto& p : policies())
        std::cout << "| `" << p.name << "` | " << p.reading->name() << " | " << keys_of(p, false) << " | " << infinipot::worded(p.summary, setting_names())
                  << " |\n";
      std::cout << "\n| setting | what it sets |\n|---|---|\n";
      for (const auto& s : settings()) std::cout << "| `" << s.key << "` | " << s.doc << " |\n";
      return;
    }
    for (const auto& p : policies()) {
      const std::string required = keys_of(p, true);
      std::printf("%-10s %s; reads: %s%s\n           %s\n", p.name, p.reading->name(), keys_of(p, false).c_str(),
                  required.empty() ? "" : ("; needs: " + required).c_str(), infinipot::worded(p.summary, setting_names()).c_str());
    }
  });
}

}  // namespace infinipot::cli
