// bench/plot_results.py on a results file written here with nih's own writer: the figures it
// names (a heatmap per task, haystack and config, a by-length chart and an ablation bar chart
// per task and haystack) are PNGs, the names are safe and the same on every run, and bad
// input (a malformed line, a missing or empty file, an --ablation config in no file) exits 2
// naming the problem. matplotlib is a dependency (scripts/deps.sh): without it this fails.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/nih.h"
#include "tests/support/cli_process.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot::nih {
namespace {

constexpr double kPlot = 120;  // eight figures; matplotlib's first import can be slow

const std::string kScript = std::string(INFINIPOT_TEST_SOURCE_DIR) + "/bench/plot_results.py";

// The first Python with matplotlib, in the order `infinipot profile --png` tries them:
// $INFINIPOT_PYTHON, python3 on PATH, the system's (a pyenv python3 often lacks the Debian
// package). "" if none has it.
std::string python_with_matplotlib() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("INFINIPOT_PYTHON"); env && *env) candidates.push_back(env);
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    for (std::string d; std::getline(dirs, d, ':');)
      if (!d.empty() && std::filesystem::exists(d + "/python3")) candidates.push_back(d + "/python3");
  }
  candidates.push_back("/usr/bin/python3");
  for (const auto& p : candidates)
    if (std::filesystem::exists(p) && test::succeeded(test::run_process({p, "-c", "import matplotlib"}, {{}, 60})))
      return p;
  return "";
}

nlohmann::json record(const std::string& config, const std::string& hay, int length, double depth, int trial,
                      bool found) {
  return {{"task", "passkey"}, {"config", config}, {"haystack", hay},  {"length", length},
          {"depth", depth},    {"trial", trial},   {"seed", 1},        {"found", found}};
}

class PlotResults : public ::testing::Test {
 protected:
  void SetUp() override {
    python_ = python_with_matplotlib();
    ASSERT_FALSE(python_.empty()) << "no python3 with matplotlib (Debian: apt install python3-matplotlib; "
                                     "scripts/deps.sh installs it; or set INFINIPOT_PYTHON)";
  }
  test::ProcResult plot(std::vector<std::string> args) {
    args.insert(args.begin(), {python_, kScript});
    return test::run_process(args, {{}, kPlot});
  }
  std::string python_;
  test::TempDir dir_;
};

const std::vector<std::string> kConfigs = {"full", "infinipot:pot=1024", "infinipot:pot=1024:cr_rope=0",
                                           "infinipot:pot=1024:catalyst=general"};

TEST_F(PlotResults, WritesEveryFigureAsAPngWithSafeStableNames) {
  const std::string results = dir_.file("r.jsonl"), out = dir_.file("figs");
  int i = 0;
  for (const auto& c : kConfigs)
    for (int length : {1024, 2048, 4096})
      for (double depth : {0.1, 0.9})
        for (int trial = 0; trial < 2; ++trial) append_result(results, record(c, "passkey", length, depth, trial, ++i % 3 != 0));
  nlohmann::json err = record("infinipot:pot=1024", "passkey", 8192, 0.5, 0, false);
  err.erase("found");
  err["error"] = "budget: the pot does not fit";
  append_result(results, err);
  // A record from before there were tasks: the passkey task's, here on another haystack.
  nlohmann::json old = record("full", "prose", 4096, 0.5, 0, true);
  old.erase("task");
  append_result(results, old);

  auto r = plot({results, "--out-dir", out, "--ablation", "infinipot:pot=1024,infinipot:pot=1024:cr_rope=0"});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  const std::set<std::string> want = {
      "heatmap--passkey--passkey--full.png",
      "heatmap--passkey--passkey--infinipot_pot-1024.png",
      "heatmap--passkey--passkey--infinipot_pot-1024_cr_rope-0.png",
      "heatmap--passkey--passkey--infinipot_pot-1024_catalyst-general.png",
      "length--passkey--passkey.png",
      "ablation--passkey--passkey.png",
      "heatmap--passkey--prose--full.png",
      "length--passkey--prose.png",
      // no ablation--passkey--prose.png: prose has none of the --ablation configs
  };
  std::set<std::string> listed;
  std::stringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) listed.insert(std::filesystem::path(line).filename().string());
  EXPECT_EQ(listed, want) << r.out;
  std::set<std::string> on_disk;
  for (const auto& e : std::filesystem::directory_iterator(out)) on_disk.insert(e.path().filename().string());
  EXPECT_EQ(on_disk, want);
  for (const auto& name : want) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t> bytes = test::read_file(out + "/" + name);
    ASSERT_GT(bytes.size(), 1000u);
    EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), std::string("\x89PNG\r\n\x1a\n", 8));
  }
  // Without --ablation every config is a bar: prose gets its chart too; the names do not change.
  const auto again = plot({results, "--out-dir", out});
  ASSERT_TRUE(test::succeeded(again)) << again.describe();
  EXPECT_NE(again.out.find("ablation--passkey--prose.png"), std::string::npos) << again.out;
  for (const auto& name : want) EXPECT_NE(again.out.find(name), std::string::npos) << name;
}

TEST_F(PlotResults, BadInputExitsTwoNamingTheProblem) {
  const std::string good = dir_.file("good.jsonl"), bad = dir_.file("bad.jsonl"), empty = dir_.file("empty.jsonl");
  append_result(good, record("full", "passkey", 1024, 0.5, 0, true));
  append_result(bad, record("full", "passkey", 1024, 0.5, 0, true));
  std::ofstream(bad, std::ios::app) << "{\"config\": \"full\", \"length\n";
  append_result(bad, record("full", "passkey", 1024, 0.5, 1, true));
  std::ofstream(empty) << "\n  \n";
  const std::string out = dir_.file("figs");
  EXPECT_TRUE(test::fails_cleanly(plot({bad, "--out-dir", out}), {"bad.jsonl", "line 2", "not a JSON record"}, 2));
  EXPECT_TRUE(test::fails_cleanly(plot({good, dir_.file("none.jsonl"), "--out-dir", out}), {"none.jsonl", "does not exist"}, 2));
  EXPECT_TRUE(test::fails_cleanly(plot({empty, "--out-dir", out}), {"empty.jsonl", "empty"}, 2));
  EXPECT_TRUE(test::fails_cleanly(plot({good, "--out-dir", out, "--ablation", "full,h2o:pot=64"}),
                                  {"--ablation", "h2o:pot=64", "known: full"}, 2));
  EXPECT_TRUE(test::fails_cleanly(plot({good}), {"--out-dir"}, 2));
  EXPECT_FALSE(std::filesystem::exists(out)) << "nothing is written when the input is refused";
}

}  // namespace
}  // namespace infinipot::nih
