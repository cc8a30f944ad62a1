// scripts/nih-worker.sh, the background runner of long evaluations, on a tiny random-weight
// model: two workers with lists of their own append to one results file, a failing cell is
// reported without stopping the list, and a second start runs no finished trial again.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "engine/nih.h"
#include "tests/support/cli_process.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

const std::string kWorker = std::string(INFINIPOT_TEST_SOURCE_DIR) + "/scripts/nih-worker.sh";

// The binary as the worker runs it: a script that starts ours (behind the emulator of a
// cross-built suite, test::with_emulator).
std::string infinipot_launcher(test::TempDir& dir) {
  const std::string path = dir.file("infinipot.sh");
  std::ofstream f(path);
  f << "#!/bin/sh\nexec";
  for (const auto& a : test::with_emulator({INFINIPOT_BIN_PATH})) f << " '" << a << "'";
  f << " \"$@\"\n";
  f.close();
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path;
}

test::ProcResult start_worker(const std::string& launcher, const std::string& list, const std::string& model,
                              double timeout) {
  test::ProcOptions o;
  o.env["INFINIPOT"] = launcher;
  o.env["MODEL"] = model;
  o.env["CHECKPOINTS"] = std::filesystem::path(list).parent_path() / "checkpoints";
  o.timeout_s = timeout;
  return test::run_process({"/bin/bash", kWorker, list}, o);
}

TEST(NihWorker, TwoWorkersShareAFileSkipFinishedTrialsAndReportAFailedCell) {
  test::TempDir dir;
  const std::string model = test::tiny_model(dir, 2048), out = dir.file("r.jsonl");
  const std::string launcher = infinipot_launcher(dir);
  const std::string cell = " --lengths 600 --trials 1 -n 2 --haystacks passkey --depths ";
  {
    std::ofstream a(dir.file("a.txt")), b(dir.file("b.txt"));
    a << "# worker a\n" << out << cell << "0.25 --policy full\n\n" << out << cell << "0.25 --policy nosuch\n"
      << out << cell << "0.75 --policy streaming:pot=256\n";
    b << out << cell << "0.5 --policy full,streaming:pot=256\n";
  }
  test::ProcOptions o;
  // Worker a's status by its pid: a job spec (%1) is gone once bash has reaped a worker that
  // finished first ("wait: %1: no such job", exit 127), while bash keeps the status of a
  // background pid it was told of.
  const std::string both = "bash '" + kWorker + "' " + dir.file("a.txt") + " > " + dir.file("a.log") + " 2>&1 & pa=$!; bash '" +
                           kWorker + "' " + dir.file("b.txt") + " > " + dir.file("b.log") + " 2>&1; wait $pa; ea=$?; " +
                           "cat " + dir.file("a.log") + " " + dir.file("b.log") + "; exit $ea";
  o.env["INFINIPOT"] = launcher;
  o.env["MODEL"] = model;
  o.env["CHECKPOINTS"] = dir.file("checkpoints");
  o.timeout_s = 900;
  auto r = test::run_process({"/bin/bash", "-c", both}, o);
  ASSERT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 1) << "worker a had a failing cell\n" << r.describe();
  EXPECT_NE(r.out.find("--policy"), std::string::npos) << "nih named the bad flag\n" << r.out;
  EXPECT_NE(r.out.find("every cell run, 1 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every cell run, 0 failed"), std::string::npos) << r.out;

  const nih::Results res = nih::load_results(out, false);
  EXPECT_TRUE(res.warnings.empty());
  std::set<std::string> cells;
  for (const auto& rec : res.records) {
    EXPECT_FALSE(rec.contains("error")) << rec.dump();
    cells.insert(rec["config"].get<std::string>() + "@" + std::to_string(rec["depth"].get<double>()));
  }
  EXPECT_EQ(res.records.size(), 4u);
  EXPECT_EQ(cells, (std::set<std::string>{"full@0.250000", "streaming:pot=256@0.750000", "full@0.500000",
                                          "streaming:pot=256@0.500000"}));
  // The workers save the pot trials read under CHECKPOINTS (nih --checkpoint-dir) and drop
  // each file once its trial is recorded.
  EXPECT_TRUE(std::filesystem::is_directory(dir.file("checkpoints")));
  EXPECT_TRUE(std::filesystem::is_empty(dir.file("checkpoints")));

  // Started again: every trial is in the file, so nothing runs and nothing is appended.
  r = start_worker(launcher, dir.file("b.txt"), model, 300);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("0 trials to run, 2 already"), std::string::npos) << r.describe();
  EXPECT_EQ(nih::load_results(out, false).records.size(), 4u);
}

TEST(NihWorker, ABadListOrBinaryIsRefusedWithWhatToDo) {
  test::TempDir dir;
  auto r = test::run_process({"/bin/bash", kWorker, dir.file("missing.txt")}, {{}, 30});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("Usage: scripts/nih-worker.sh LIST"), std::string::npos) << r.err;
  std::ofstream(dir.file("l.txt")) << "x.jsonl --lengths 600\n";
  test::ProcOptions o;
  o.env["INFINIPOT"] = dir.file("no-binary");
  o.timeout_s = 30;
  r = test::run_process({"/bin/bash", kWorker, dir.file("l.txt")}, o);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("scripts/build.sh"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace infinipot
