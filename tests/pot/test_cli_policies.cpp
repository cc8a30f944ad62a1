// `infinipot policies`: the registry's table as the CLI prints it (docs/pot.md's table is its
// --markdown). Every row and every setting of pot/policy_registry.h is there, as the table says.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "pot/policy_registry.h"
#include "tests/support/cli_process.h"

namespace infinipot {
namespace {

TEST(CliPolicies, JsonListsEveryRowWithItsReadingAndSettings) {
  const test::ProcResult r = test::run_infinipot({"policies", "--json"});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("policies").size(), policies().size());
  size_t i = 0;
  for (const auto& p : policies()) {
    const nlohmann::json& row = j["policies"][i++];
    SCOPED_TRACE(p.name);
    EXPECT_EQ(row.at("name"), p.name);
    EXPECT_EQ(row.at("reading"), p.reading->name());
    EXPECT_EQ(row.at("summary"), test::cli_words(p.summary));
    nlohmann::json reads = nlohmann::json::array();
    for (const auto& s : settings())
      if (p.accepts(s.setting)) reads.push_back(s.key);
    EXPECT_EQ(row.at("settings"), reads);
  }
  EXPECT_EQ(j.at("settings").size(), settings().size());
  // The two readings that matter most, named as users read them.
  EXPECT_EQ(j["policies"][0].at("reading"), "through a pot");
  EXPECT_EQ(j["policies"].back().at("settings"), nlohmann::json::array({"ctx"})) << "full reads only its cache size";
}

TEST(CliPolicies, MarkdownHasARowPerPolicyAndPerSetting) {
  const test::ProcResult r = test::run_infinipot({"policies", "--markdown"});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  for (const auto& p : policies()) EXPECT_NE(r.out.find("| `" + std::string(p.name) + "` |"), std::string::npos) << p.name;
  for (const auto& s : settings()) EXPECT_NE(r.out.find("| `" + std::string(s.key) + "` |"), std::string::npos) << s.key;
  const test::ProcResult both = test::run_infinipot({"policies", "--json", "--markdown"});
  EXPECT_EQ(both.exit_code, 2) << both.describe();
}

}  // namespace
}  // namespace infinipot
