// The fixture of the `infinipot run` pot tests through the real binary (test_cli_pot.cpp,
// test_cli_pot_diagnostics.cpp): the real model, made-up documents, and helpers to run the
// binary and read its JSON.
#pragma once
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "pot/policy_registry.h"
#include "runtime/device_memory.h"
#include "tests/support/cli_process.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace test_cli_pot {

using nlohmann::json;
using test::fails_cleanly;
using test::run_infinipot;
using test::succeeded;
using test::TempDir;

inline constexpr double kQuick = 30;    // seconds: every refusal here comes before any device work
inline constexpr double kRun = 600;     // a real run through a small pot (kernels possibly compiled from cold)

inline void write_text(const std::string& path, const std::string& text) {
  test::write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
}

// ~1,500 tokens of made-up facts (43 lines): much more than the pots below hold; `lines`
// fewer for a shorter one (8 lines: ~300 tokens).
inline std::string long_document(int lines = 43) {
  static const char* towns[] = {"Avalon",    "Brindle",  "Cresthaven", "Dunmore", "Elmsworth",
                                "Fairhollow", "Glenrock", "Harrowgate", "Ironvale", "Juniper Bay"};
  static const char* colours[] = {"red", "blue", "green", "amber", "violet", "silver", "golden", "white"};
  std::string doc;
  for (int i = 0; i < lines; ++i)
    doc += "In the year " + std::to_string(1700 + i * 3) + ", the town of " + towns[i % 10] + " painted its " +
           std::to_string(i + 1) + "th bridge " + colours[(i * 3) % 8] + ", and " + std::to_string(40 + i * 7) +
           " people came to see it.\n";
  return doc;
}

// The integer right after the first match of `regex_prefix` in `text` (-1 if none).
inline long long number_after(const std::string& text, const std::string& regex_prefix) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(regex_prefix + "(-?[0-9]+)"))) return -1;
  return std::stoll(m[1].str());
}

class CliPot : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::real_model_path();
    ASSERT_FALSE(model_.empty());
    long_doc_ = dir_.file("long.txt");
    short_doc_ = dir_.file("short.txt");
    medium_doc_ = dir_.file("medium.txt");
    write_text(long_doc_, long_document());
    write_text(short_doc_, "Hello there.\n");
    write_text(medium_doc_, long_document(8));
  }
  // `run -m MODEL` followed by `args`.
  test::ProcResult run(const std::vector<std::string>& args, double timeout_s = kRun) {
    std::vector<std::string> all = {"run", "-m", model_};
    all.insert(all.end(), args.begin(), args.end());
    return run_infinipot(all, {{}, timeout_s});
  }
  // A run with --json that must succeed; its JSON (an empty object on failure).
  json run_json(std::vector<std::string> args) {
    args.push_back("--json");
    last_ = run(args);
    EXPECT_TRUE(succeeded(last_));
    if (last_.exit_code != 0) return json::object();
    try {
      return json::parse(last_.out);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "stdout is not JSON (" << e.what() << "): " << last_.describe();
      return json::object();
    }
  }
  // Tokens of `text` (the tokenize subcommand: no device work).
  int token_count(const std::vector<std::string>& input) {
    std::vector<std::string> all = {"tokenize", "-m", model_, "--json"};
    all.insert(all.end(), input.begin(), input.end());
    auto r = run_infinipot(all, {{}, kQuick});
    EXPECT_TRUE(succeeded(r));
    if (r.exit_code != 0) return -1;
    return static_cast<int>(json::parse(r.out).at("tokens").size());
  }
  std::string model_, long_doc_, short_doc_, medium_doc_;
  TempDir dir_;
  test::ProcResult last_;
};

}  // namespace test_cli_pot
}  // namespace infinipot
