// `infinipot bench` and the progress line through the real binary, on tiny random-weight
// models (fast on PoCL): the JSON rows carry every documented field with sane values, a cap
// is never exceeded, --pot auto takes the largest pot the cap allows (one more entry does
// not fit), --vs-llama-cpp reads llama-bench's JSON (a stand-in script here; the real one is
// run by docs/benchmarks.md's commands), bad flags are usage errors naming the flag, and the
// prefill progress line appears on a terminal only.
#include <gtest/gtest.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <map>
#include <string>
#include <vector>

#include "tests/kit/tiny_model.h"
#include "tests/support/cli_process.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

using nlohmann::json;
constexpr double kQuick = 30;
constexpr double kRun = 600;

class Bench : public ::testing::Test {
 protected:
  void SetUp() override {
    TinyLlamaOptions o;
    o.n_ctx = 8192;  // long documents stay inside the tiny model's context
    model_ = dir_.file("tiny.gguf");
    write_tiny_llama(model_, o);
  }
  test::ProcResult bench(const std::vector<std::string>& args, double timeout = kRun) {
    std::vector<std::string> all = {"bench", "-m", model_, "--no-warmup", "-n", "4"};
    all.insert(all.end(), args.begin(), args.end());
    return test::run_infinipot(all, {{}, timeout});
  }
  json bench_json(std::vector<std::string> args) {
    args.push_back("--json");
    const auto r = bench(args);
    EXPECT_TRUE(test::succeeded(r)) << r.describe();
    if (r.exit_code != 0) return json::array();
    return json::parse(r.out);
  }
  test::TempDir dir_;
  std::string model_;
};

const json* find_row(const json& rows, const std::string& policy, bool pot_auto = false) {
  for (const auto& r : rows)
    if (r["policy"] == policy && r.value("pot_auto", false) == pot_auto) return &r;
  return nullptr;
}

TEST_F(Bench, JsonRowsHaveEveryFieldWithSaneValues) {
  const json rows = bench_json({"--ctx", "700", "--policy", "infinipot,full", "--pot", "160", "--device-mem", "64M",
                                "-r", "2", "--chunk", "64"});
  ASSERT_EQ(rows.size(), 2u) << rows.dump(1);
  const std::string build = test::infinipot_build_id();
  ASSERT_FALSE(build.empty());
  for (const auto& r : rows) {
    SCOPED_TRACE(r.dump());
    for (const char* k : {"ctx", "policy", "pot", "device_mem", "prefill_tok_s", "decode_tok_s", "ttft_s", "cd_time_s",
                          "cd_share_of_ttft", "peak_device_bytes", "device_bytes", "host_peak_rss", "prompt_tokens",
                          "ccd_cycles", "stats", "longest_full_cache_ctx", "build"})
      EXPECT_TRUE(r.contains(k)) << k;
    EXPECT_EQ(r["build"], build);  // the commit the binary was built from, as --version says
    EXPECT_FALSE(r.contains("error"));
    EXPECT_EQ(r["ctx"], 700);
    EXPECT_EQ(r["device_mem"], 64u << 20);
    EXPECT_GT(r["prefill_tok_s"].get<double>(), 0);
    EXPECT_GT(r["decode_tok_s"].get<double>(), 0);
    EXPECT_GT(r["ttft_s"].get<double>(), 0);
    // The document plus the chat template and the question.
    EXPECT_GE(r["prompt_tokens"].get<int>(), 700);
    EXPECT_LE(r["prompt_tokens"].get<int>(), 900);
    EXPECT_LE(r["peak_device_bytes"].get<uint64_t>(), 64u << 20);
    EXPECT_GT(r["device_bytes"]["weights"].get<uint64_t>(), 0u);
    EXPECT_GT(r["device_bytes"]["kv_cache"].get<uint64_t>(), 0u);
    EXPECT_GT(r["host_peak_rss"].get<long long>(), 1 << 20);
    EXPECT_GE(r["cd_time_s"].get<double>(), 0);
    EXPECT_LT(r["cd_time_s"].get<double>(), r["ttft_s"].get<double>());
    for (const char* k : {"prefill_tok_s", "decode_tok_s", "ttft_s"}) {
      const auto& s = r["stats"][k];
      EXPECT_LE(s["min"].get<double>(), s["median"].get<double>()) << k;
      EXPECT_LE(s["median"].get<double>(), s["max"].get<double>()) << k;
    }
  }
  const json* pot = find_row(rows, "infinipot");
  const json* full = find_row(rows, "full");
  ASSERT_TRUE(pot && full);
  EXPECT_EQ((*pot)["pot"], 160);
  EXPECT_TRUE((*full)["pot"].is_null());
  EXPECT_GT((*pot)["ccd_cycles"].get<int>(), 2);  // 700 tokens through 160 entries
  EXPECT_GT((*pot)["cd_time_s"].get<double>(), 0);
  EXPECT_EQ((*full)["ccd_cycles"], 0);
  EXPECT_EQ((*full)["cd_time_s"], 0.0);
  // The pot's KV is its 160 entries; the full cache holds the whole prompt and the answer.
  const double per_entry = (*full)["device_bytes"]["kv_cache"].get<double>() / (*full)["kv_capacity"].get<double>();
  EXPECT_NEAR((*pot)["device_bytes"]["kv_cache"].get<double>(), 160 * per_entry, per_entry);
  EXPECT_GE((*full)["kv_capacity"].get<int>(), (*full)["prompt_tokens"].get<int>() + 4);
  EXPECT_LT((*pot)["peak_device_bytes"], (*full)["peak_device_bytes"]);
  EXPECT_GT((*full)["longest_full_cache_ctx"].get<int>(), 700);
}

// --policy takes specs as nih does: a spec's settings reach the pot (its answer's pot record
// says nuc_stride), a spec that names pot= is that row alone while the others sweep --pot, and
// the rows say which config they ran.
TEST_F(Bench, PolicySpecsReachThePotAndNameTheirRows) {
  const json rows = bench_json({"--ctx", "700", "--policy", "infinipot,infinipot:nuc_stride=4,h2o:pot=192:keep=96",
                                "--pot", "128,160", "--chunk", "64"});
  ASSERT_EQ(rows.size(), 5u) << rows.dump(1);
  std::map<std::string, std::vector<int>> pots;
  for (const auto& r : rows) {
    SCOPED_TRACE(r.dump());
    ASSERT_FALSE(r.contains("error"));
    pots[r["policy_config"].get<std::string>()].push_back(r["pot"].get<int>());
    EXPECT_GT(r["ccd_cycles"].get<int>(), 0);
  }
  EXPECT_EQ(pots["infinipot"], (std::vector<int>{128, 160}));
  EXPECT_EQ(pots["infinipot:nuc_stride=4"], (std::vector<int>{128, 160}));
  EXPECT_EQ(pots["h2o:keep=96"], (std::vector<int>{192}));
  for (const auto& r : rows) {
    const json& pr = r["pot_report"];
    EXPECT_EQ(pr["capacity"], r["pot"]);
    EXPECT_EQ(pr["nuc_stride"].get<int>(), r["policy_config"] == "infinipot:nuc_stride=4" ? 4 : 1) << r.dump();
    if (r["policy"] == "h2o") EXPECT_EQ(pr["keep"], 96);
  }
  for (const auto& r : rows) EXPECT_EQ(r["policy"], r["policy_config"].get<std::string>().substr(0, r["policy"].get<std::string>().size()));
  // The table names the config too.
  const auto table = bench({"--ctx", "700", "--policy", "infinipot:nuc_stride=4", "--pot", "128", "--chunk", "64"});
  ASSERT_TRUE(test::succeeded(table)) << table.describe();
  EXPECT_NE(table.out.find("infinipot:nuc_stride=4"), std::string::npos) << table.out;
  // A setting the policy does not read, or a malformed one, is refused naming it.
  EXPECT_TRUE(test::fails_cleanly(bench({"--policy", "cap:nuc_stride=4"}, kQuick), {"--policy", "nuc_stride", "cap"}, 2,
                                  kQuick));
  EXPECT_TRUE(test::fails_cleanly(bench({"--policy", "infinipot:size=3"}, kQuick), {"--policy", "size"}, 2, kQuick));
}

TEST_F(Bench, PotAutoTakesTheLargestPotTheCapAllows) {
  // Bounds from two measured rows: a small pot, and the whole 1,500-token prompt in memory.
  const json ref = bench_json({"--ctx", "1500", "--policy", "infinipot,full", "--pot", "128", "--chunk", "64"});
  ASSERT_EQ(ref.size(), 2u);
  const uint64_t small = (*find_row(ref, "infinipot"))["peak_device_bytes"].get<uint64_t>();
  const uint64_t whole = (*find_row(ref, "full"))["peak_device_bytes"].get<uint64_t>();
  ASSERT_LT(small, whole);
  const std::string cap = std::to_string((small + whole) / 2);

  const json rows = bench_json({"--ctx", "1500", "--pot", "auto", "--device-mem", cap, "--chunk", "64"});
  ASSERT_EQ(rows.size(), 1u);
  const json& r = rows[0];
  ASSERT_FALSE(r.contains("error")) << r.dump();
  EXPECT_TRUE(r.value("pot_auto", false));
  const int pot = r["pot"].get<int>();
  EXPECT_GT(pot, 128);
  EXPECT_LT(pot, r["prompt_tokens"].get<int>());
  EXPECT_LE(r["peak_device_bytes"].get<uint64_t>(), std::stoull(cap));
  EXPECT_GT(r["ccd_cycles"].get<int>(), 0);

  // One entry more does not fit the same cap: the row says so and names the minimum.
  const json over = bench_json({"--ctx", "1500", "--pot", std::to_string(pot + 1), "--device-mem", cap, "--chunk", "64"});
  ASSERT_EQ(over.size(), 1u);
  ASSERT_TRUE(over[0].contains("error")) << over[0].dump();
  EXPECT_NE(over[0]["error"].get<std::string>().find("does not fit"), std::string::npos);
  EXPECT_GT(over[0]["min_device_mem"].get<uint64_t>(), std::stoull(cap));

  // The table says which pot auto chose.
  const auto t = bench({"--ctx", "1500", "--pot", "auto", "--device-mem", cap, "--chunk", "64"});
  ASSERT_TRUE(test::succeeded(t)) << t.describe();
  EXPECT_TRUE(std::regex_search(t.out, std::regex("\\| +" + std::to_string(pot) + "\\* \\|"))) << t.out;
  EXPECT_NE(t.out.find("largest pot the cap allows"), std::string::npos) << t.out;
}

TEST_F(Bench, VsLlamaCppReadsLlamaBenchJson) {
  // A stand-in llama-bench: checks the arguments bench passes and prints llama-bench's JSON
  // records (the real program's format, `-o json`), one speed for prefill, one for decode.
  const std::string bin = dir_.file("llama-bench");
  std::ofstream(bin) << "#!/bin/sh\n"
                        "sleep 0.2\n"
                        "case \" $* \" in *\" -m " + model_ + " \"*) ;; *) echo 'no -m' >&2; exit 9;; esac\n"
                        "case \" $* \" in *\" -o json \"*) ;; *) echo 'no json' >&2; exit 9;; esac\n"
                        "case \" $* \" in *\" -d 700 \"*) echo '[{\"n_gen\": 4, \"avg_ts\": 50.0}]';;\n"
                        "  *\" -p 700 \"*) echo '[{\"n_prompt\": 700, \"avg_ts\": 1000.0}]';;\n"
                        "  *) echo 'bad args' >&2; exit 9;; esac\n";
  std::filesystem::permissions(bin, std::filesystem::perms::owner_all);
  const json rows = bench_json({"--ctx", "700", "--policy", "full", "--vs-llama-cpp", dir_.path(), "--threads", "2"});
  ASSERT_EQ(rows.size(), 2u) << rows.dump(1);
  const json* ours = find_row(rows, "full");
  const json* theirs = find_row(rows, "llama.cpp");
  ASSERT_TRUE(ours && theirs);
  ASSERT_FALSE(theirs->contains("error")) << theirs->dump();
  EXPECT_EQ((*theirs)["prefill_tok_s"], 1000.0);
  EXPECT_EQ((*theirs)["decode_tok_s"], 50.0);
  EXPECT_NEAR((*theirs)["ttft_s"].get<double>(), 0.7, 1e-9);
  // Its own peak RSS: a shell script's few MiB, not this (much larger) process's.
  EXPECT_GT((*theirs)["host_peak_rss"].get<long long>(), 0);
  EXPECT_LT((*theirs)["host_peak_rss"].get<long long>(), 64LL << 20);
  EXPECT_GT((*ours)["host_peak_rss"].get<long long>(), 64LL << 20);
  EXPECT_NEAR((*ours)["prefill_vs_llama_cpp"].get<double>(), (*ours)["prefill_tok_s"].get<double>() / 1000.0, 1e-9);

  // A failing llama-bench is a row with its error, not a crash.
  std::ofstream(bin) << "#!/bin/sh\necho 'model file not supported' >&2\nexit 1\n";
  const json failed = bench_json({"--ctx", "700", "--policy", "full", "--vs-llama-cpp", dir_.path()});
  ASSERT_EQ(failed.size(), 2u);
  ASSERT_TRUE(find_row(failed, "llama.cpp")->contains("error"));
  EXPECT_NE((*find_row(failed, "llama.cpp"))["error"].get<std::string>().find("model file not supported"),
            std::string::npos);
}

// --llama-cpp-tool llama-completion: one run per length reads the document our rows read and
// decodes after it; the rates come from llama.cpp's own timing lines on stderr.
TEST_F(Bench, VsLlamaCppCompletionReadsItsTimingLines) {
  const std::string bin = dir_.file("llama-completion");
  const std::string seen = dir_.file("prompt-seen.txt");
  // A stand-in: checks the arguments, keeps the prompt file it was given, prints the timing
  // lines of the real program (common_perf_print), 700 prompt tokens in 2 s, 3 runs in 0.1 s.
  std::ofstream(bin) << "#!/bin/sh\n"
                        "case \" $* \" in *\" -m " + model_ + " \"*) ;; *) echo 'no -m' >&2; exit 9;; esac\n"
                        "case \" $* \" in *\" -n 4 \"*) ;; *) echo 'no -n' >&2; exit 9;; esac\n"
                        "case \" $* \" in *\" --ignore-eos \"*) ;; *) echo 'would stop at EOS' >&2; exit 9;; esac\n"
                        "while [ $# -gt 0 ]; do [ \"$1\" = -f ] && cp \"$2\" " + seen + "; shift; done\n"
                        "echo 'the answer' \n"
                        "echo '0.01.0 I common_perf_print:        load time =     100.00 ms' >&2\n"
                        "echo '0.01.0 I common_perf_print: prompt eval time =    2000.00 ms /   700 tokens (    2.86 ms "
                        "per token,   350.00 tokens per second)' >&2\n"
                        "echo '0.01.0 I common_perf_print:        eval time =     100.00 ms /     3 runs   (   33.33 ms "
                        "per token,    30.00 tokens per second)' >&2\n";
  std::filesystem::permissions(bin, std::filesystem::perms::owner_all);
  const json rows = bench_json({"--ctx", "700", "--policy", "full", "--vs-llama-cpp", dir_.path(), "--llama-cpp-tool",
                                "llama-completion", "--threads", "2"});
  ASSERT_EQ(rows.size(), 2u) << rows.dump(1);
  const json* theirs = find_row(rows, "llama.cpp");
  ASSERT_TRUE(theirs);
  ASSERT_FALSE(theirs->contains("error")) << theirs->dump();
  EXPECT_EQ((*theirs)["tool"], "llama-completion");
  EXPECT_NEAR((*theirs)["prefill_tok_s"].get<double>(), 350.0, 1e-9);
  EXPECT_NEAR((*theirs)["decode_tok_s"].get<double>(), 30.0, 1e-9);
  EXPECT_NEAR((*theirs)["ttft_s"].get<double>(), 2.0, 1e-9);
  EXPECT_EQ((*theirs)["prompt_tokens"], 700);
  EXPECT_EQ((*theirs)["prefill_cmd"], (*theirs)["decode_cmd"]) << "one run gives both";
  std::ifstream prompt(seen);
  ASSERT_TRUE(prompt) << "the stand-in got no prompt file";
  const std::string text((std::istreambuf_iterator<char>(prompt)), std::istreambuf_iterator<char>());
  EXPECT_GT(text.size(), 1000u) << "the document of our 700-token row, not an empty file";

  // Timing lines missing (another build's output): a row naming what it looked for.
  std::ofstream(bin) << "#!/bin/sh\necho 'the answer'\n";
  const json silent = bench_json({"--ctx", "700", "--policy", "full", "--vs-llama-cpp", dir_.path(),
                                  "--llama-cpp-tool", "llama-completion"});
  ASSERT_EQ(silent.size(), 2u);
  ASSERT_TRUE(find_row(silent, "llama.cpp")->contains("error"));
  EXPECT_NE((*find_row(silent, "llama.cpp"))["error"].get<std::string>().find("prompt eval time"), std::string::npos);
  EXPECT_TRUE(test::fails_cleanly(bench({"--vs-llama-cpp", dir_.file("nowhere"), "--llama-cpp-tool", "llama-completion"},
                                        kQuick),
                                  {"--vs-llama-cpp", "llama-completion", "build-llama-cpp.sh"}, 1, kQuick));
  EXPECT_TRUE(test::fails_cleanly(bench({"--llama-cpp-tool", "llama-cli"}, kQuick), {"--llama-cpp-tool", "llama-cli"}, 2,
                                  kQuick));
}

// The document file handed to llama-completion goes, whether its run succeeds or fails (a
// stand-in that writes the timing lines, one that exits 9, a staged run refused).
TEST_F(Bench, VsLlamaCppLeavesNoPromptFile) {
  const std::string bin = dir_.file("llama-completion"), tmp = dir_.file("tmp");
  std::filesystem::create_directory(tmp);
  const auto run = [&](std::vector<std::string> args) {
    std::vector<std::string> all = {"bench", "-m", model_, "--no-warmup", "-n", "4", "--ctx", "300", "--policy", "full",
                                    "--vs-llama-cpp", dir_.path(), "--llama-cpp-tool", "llama-completion"};
    all.insert(all.end(), args.begin(), args.end());
    return test::run_infinipot(all, {{{"TMPDIR", tmp}}, kRun});
  };
  std::ofstream(bin) << "#!/bin/sh\n"
                        "echo '0.01.0 I common_perf_print: prompt eval time =    1000.00 ms /   300 tokens (    3.33 ms "
                        "per token,   300.00 tokens per second)' >&2\n"
                        "echo '0.01.0 I common_perf_print:        eval time =     100.00 ms /     3 runs   (   33.33 ms "
                        "per token,    30.00 tokens per second)' >&2\n";
  std::filesystem::permissions(bin, std::filesystem::perms::owner_all);
  EXPECT_TRUE(test::succeeded(run({})));
  std::ofstream(bin) << "#!/bin/sh\nexit 9\n";
  const auto failed = run({});
  std::ofstream(dir_.file("state-plan")) << "not a directory";
  const auto refused = run({"--llama-cpp-resume", dir_.file("state-plan")});
  EXPECT_NE(refused.exit_code, 0) << refused.describe();
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(tmp)) left.push_back(e.path().filename().string());
  EXPECT_TRUE(left.empty()) << "left in TMPDIR: " << testing::PrintToString(left) << "\n" << failed.describe();
}

// --llama-cpp-resume: a prefill of hours in stages through llama-completion's prompt cache.
// The stand-in plays llama.cpp's part: a prompt of T tokens (its bytes / 4) evaluated at 1 ms
// a token after the M tokens its cache file holds; --prompt-cache-all writes T into the file.
// A stage killed midway (exit 1 once, while a marker file exists, its cache file torn) leaves
// a row with the error; the rerun runs only the stages left and the row sums all of them.
TEST_F(Bench, VsLlamaCppStagedPrefillResumesWhereItStopped) {
  const std::string bin = dir_.file("llama-completion"), calls = dir_.file("calls.txt"),
                    kill_once = dir_.file("kill-stage-1");
  std::ofstream(bin) << "#!/bin/sh\n"
                        "f=; cache=; n=; mode=\n"
                        "while [ $# -gt 0 ]; do case \"$1\" in -f) f=$2; shift;; --prompt-cache) cache=$2; shift;;\n"
                        "  -n) n=$2; shift;; --prompt-cache-ro) mode=ro;; --prompt-cache-all) mode=all;; esac; shift; done\n"
                        "t=$(( $(wc -c < \"$f\") / 4 ))\n"
                        "echo \"$(basename \"$f\") $mode\" >> " + calls + "\n"
                        "if [ -e " + kill_once + " ] && [ \"$(basename \"$f\")\" = stage-1.txt ]; then rm " + kill_once +
                        "; echo partial > \"$cache\"; echo killed >&2; exit 1; fi\n"
                        "m=0\n"
                        "if [ -s \"$cache\" ]; then m=$(cat \"$cache\"); case $m in *[!0-9]*) echo 'failed to load session file' >&2; exit 1;; esac\n"
                        "  if [ $((2 * m)) -lt $t ]; then echo \"W llama_completion: session file has low similarity to "
                        "prompt ($m / $t tokens); will mostly be reevaluated\" >&2;\n"
                        "  else echo \"I llama_completion: session file matches $m / $t tokens of prompt\" >&2; fi; fi\n"
                        "e=$((t - m))\n"
                        "echo \"I common_perf_print: prompt eval time = $e.00 ms / $e tokens (1.00 ms per token)\" >&2\n"
                        "echo \"I common_perf_print:        eval time =   100.00 ms /  $n runs   (25.00 ms per token)\" >&2\n"
                        "[ \"$mode\" = all ] && echo $t > \"$cache\"\n"
                        "exit 0\n";
  std::filesystem::permissions(bin, std::filesystem::perms::owner_all);
  std::ofstream(kill_once) << "x";
  const std::string state = dir_.file("state");
  const std::vector<std::string> args = {"--ctx",         "700",        "--only-llama-cpp",   "--vs-llama-cpp",
                                         dir_.path(),     "--llama-cpp-tool", "llama-completion", "--llama-cpp-resume",
                                         state,           "--llama-cpp-stages", "3",              "--threads",
                                         "2"};
  const json killed = bench_json(args);
  ASSERT_EQ(killed.size(), 1u) << "--only-llama-cpp: llama.cpp's row alone\n" << killed.dump(1);
  ASSERT_TRUE(killed[0].contains("error"));
  EXPECT_NE(killed[0]["error"].get<std::string>().find("killed"), std::string::npos) << killed[0].dump();

  const json rows = bench_json(args);
  ASSERT_EQ(rows.size(), 1u);
  const json& r = rows[0];
  ASSERT_FALSE(r.contains("error")) << r.dump(1);
  EXPECT_EQ(r["stages"], 3);
  // Every stage read a prefix of the document (the stand-in took bytes / 4 as its tokens).
  const int total = r["prompt_tokens"].get<int>();
  EXPECT_GT(total, 1000 / 4);
  // T tokens evaluated once each at 1 ms: 1000 tok/s over the three stages, whatever the split;
  // decode: 4 runs in 100 ms of the last stage.
  EXPECT_NEAR(r["prefill_tok_s"].get<double>(), 1000.0, 1e-6);
  EXPECT_NEAR(r["ttft_s"].get<double>(), total / 1000.0, 1e-9);
  EXPECT_NEAR(r["decode_tok_s"].get<double>(), 40.0, 1e-9);
  EXPECT_NE(r["decode_cmd"].get<std::string>().find("--prompt-cache-ro"), std::string::npos) << "the last stage only reads";
  // The share of two threads' time the stand-in got: a shell script that mostly waits.
  EXPECT_GE(r["cpu_share"].get<double>(), 0.0);
  EXPECT_LT(r["cpu_share"].get<double>(), 1.0);

  // Stage 1 killed (its half-written cache file left behind), then stages 1, 2 and 3: nothing
  // finished ran twice, and the torn file was not read.
  std::ifstream in(calls);
  std::vector<std::string> seen;
  for (std::string line; std::getline(in, line);) seen.push_back(line);
  EXPECT_EQ(seen, (std::vector<std::string>{"stage-1.txt all", "stage-1.txt all", "stage-2.txt all", "stage-3.txt ro"}));
  // The finished run's cache files are gone (at 128K each is gigabytes); its records stay.
  for (const auto& e : std::filesystem::directory_iterator(state + "/ctx-700"))
    EXPECT_NE(e.path().extension(), ".bin") << e.path();

  // Another split of the same directory is refused, naming the flag, before anything runs.
  auto other = args;
  other[std::find(other.begin(), other.end(), "3") - other.begin()] = "4";
  EXPECT_TRUE(test::fails_cleanly(bench(other, kQuick), {"--llama-cpp-resume", "another run"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(bench({"--vs-llama-cpp", dir_.path(), "--llama-cpp-resume", state}, kQuick),
                                  {"--llama-cpp-resume", "llama-completion"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(bench({"--vs-llama-cpp", dir_.path(), "--llama-cpp-tool", "llama-completion",
                                         "--llama-cpp-resume", state, "-r", "2"},
                                        kQuick),
                                  {"--llama-cpp-resume", "--reps"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(bench({"--llama-cpp-stages", "3"}, kQuick), {"--llama-cpp-stages"}, 2, kQuick));
}

TEST_F(Bench, UsageErrorsNameTheFlag) {
  EXPECT_TRUE(test::fails_cleanly(bench({"--ctx", "4096,abc"}, kQuick), {"--ctx", "abc"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(bench({"--pot", "big"}, kQuick), {"--pot", "big"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(bench({"--device-mem", "12Q"}, kQuick), {"--device-mem", "12Q"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(bench({"--policy", "nosuch"}, kQuick), {"--policy", "nosuch", "infinipot"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(bench({"-r", "0"}, kQuick), {"--reps"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(bench({"-n", "1"}, kQuick), {"-n"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(bench({"--vs-llama-cpp", dir_.file("nowhere")}, kQuick),
                                  {"--vs-llama-cpp", "llama-bench", "build-llama-cpp.sh"}, 1, kQuick));
  EXPECT_TRUE(test::fails_cleanly(bench({"--haystack", dir_.file("missing.txt")}, kQuick), {"missing.txt"}, 1, kQuick));
  // llama.cpp's own flags without llama.cpp to run are refused, not ignored.
  EXPECT_TRUE(test::fails_cleanly(bench({"--llama-cpp-tool", "llama-completion"}, kQuick),
                                  {"--llama-cpp-tool", "--vs-llama-cpp"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(bench({"--threads", "2"}, kQuick), {"--threads", "--vs-llama-cpp"}, 2, kQuick));
}

// --attention: one row per variant and cache length, at the model's heads; the rates are
// what the flops and seconds say.
TEST_F(Bench, AttentionTimesEveryVariantAtTheModelsHeads) {
  const std::string out = dir_.file("attention.json");
  const json rows = bench_json({"--attention", "--ctx", "16,64", "--chunk", "24", "-r", "2", "--out", out});
  ASSERT_EQ(rows.size(), 10u) << rows.dump(1);  // vec16 with 4, 8, 16 rows, tiled, untiled x 2 lengths
  std::ifstream written(out);
  ASSERT_TRUE(written) << "--out " << out << " was not written";
  EXPECT_EQ(json::parse(written), rows);
  std::set<std::string> variants;
  for (const auto& r : rows) {
    variants.insert(r["variant"].get<std::string>());
    EXPECT_EQ(r["n_heads"], 4);
    EXPECT_EQ(r["n_kv_heads"], 2);
    EXPECT_EQ(r["head_dim"], 16);
    EXPECT_EQ(r["rows"], 24);
    EXPECT_TRUE(r["n_past"] == 16 || r["n_past"] == 64) << r.dump();
    const double s = r["seconds"], n_past = r["n_past"];
    ASSERT_GT(s, 0.0);
    // Causal keys of 24 rows after n_past entries, 2 products of 16 multiply-adds per head.
    const double flops = 4.0 * (24 * n_past + 24 * 25 / 2.0) * 4 * 16;
    EXPECT_NEAR(r["gflops"].get<double>(), flops / s / 1e9, 1e-6 * flops / s / 1e9);
    EXPECT_TRUE(r["tuning"].is_object() && !r["tuning"].empty());
  }
  EXPECT_EQ(variants,
            (std::set<std::string>{"vec16 rows 4", "vec16 rows 8", "vec16 rows 16", "tiled 16x32", "untiled"}));
  EXPECT_TRUE(test::fails_cleanly(bench({"--attention", "--gemm"}, kQuick), {"--gemm", "--attention"}, 2, kQuick));
}

// --matvec: every decode product of the model (float, the fused forms, int8 where the type
// has it) and one token's worth per path; the rates are what the bytes and seconds say.
TEST_F(Bench, MatvecTimesEveryDecodeProduct) {
  TinyLlamaOptions o;
  o.matrix_type = gguf::TensorType::Q4_1;  // SmolLM2's encodings: Q4_1 layers, a Q8_0 tied head
  o.embd_type = gguf::TensorType::Q8_0;
  const std::string model = dir_.file("tiny-q4.gguf");
  write_tiny_llama(model, o);
  const std::string out = dir_.file("matvec.json");
  const auto r = test::run_infinipot({"bench", "-m", model, "--matvec", "-r", "2", "--json", "--out", out}, {{}, kRun});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  const json rows = json::parse(r.out);
  std::ifstream written(out);
  ASSERT_TRUE(written) << "--out " << out << " was not written";
  EXPECT_EQ(json::parse(written), rows);
  std::multiset<std::string> seen;
  for (const auto& row : rows) {
    const std::string path = row["path"], product = row["product"];
    seen.insert(path + " " + product);
    const double s = row["seconds"], bytes = row["bytes"];
    ASSERT_GT(s, 0.0) << row.dump();
    ASSERT_GT(bytes, 0.0) << row.dump();
    EXPECT_NEAR(row["gbps"].get<double>(), bytes / s / 1e9, 1e-9 * bytes / s / 1e9) << row.dump();
    if (product == "one token") continue;
    EXPECT_LE(row["seconds_min"].get<double>(), s) << row.dump();
    EXPECT_EQ(row["type"], product == "lm_head" ? "Q8_0" : "Q4_1") << row.dump();
    // A Q4_1 row: 20 bytes per 32 weights; Q8_0: 34.
    const double per_block = product == "lm_head" ? 34 : 20;
    EXPECT_EQ(bytes, row["rows"].get<double>() * row["cols"].get<double>() / 32 * per_block) << row.dump();
  }
  const std::multiset<std::string> expected = {
      "float q|k|v", "float o", "float gate|up", "float down", "float lm_head", "fused q|k|v", "fused gate|up",
      "fused lm_head", "int8 q|k|v", "int8 o", "int8 gate|up", "int8 down", "int8 lm_head", "float one token",
      "fused one token", "int8 one token"};
  EXPECT_EQ(seen, expected);
  EXPECT_TRUE(test::fails_cleanly(bench({"--matvec", "--gemm"}, kQuick), {"--gemm", "--matvec"}, 2, kQuick));
}

// Layers that differ in encoding, as in Q4_K_M files (Gemma 3 270M): the loader fuses q|k|v or
// gate|up only where the parts match, so layer 0 here holds q, k, v apart and gate|up fused,
// layer 1 the other way round. Each product is timed over the layers that hold it (it once
// took layer 0's set for every layer and launched layer 1's empty v), the integer path only
// where the type has it.
TEST_F(Bench, MatvecTimesEachProductOverTheLayersThatHoldIt) {
  TinyLlamaOptions o;
  o.matrix_type = gguf::TensorType::Q4_1;
  o.embd_type = gguf::TensorType::Q8_0;
  o.tensor_types = {{"blk.0.attn_v.weight", gguf::TensorType::F16}, {"blk.1.ffn_up.weight", gguf::TensorType::Q8_0}};
  const std::string model = dir_.file("tiny-mixed.gguf");
  write_tiny_llama(model, o);
  const auto r = test::run_infinipot({"bench", "-m", model, "--matvec", "-r", "1", "--json"}, {{}, kRun});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  std::multiset<std::string> seen;
  for (const auto& row : json::parse(r.out)) {
    const std::string path = row["path"], product = row["product"];
    seen.insert(path + " " + product);
    if (product == "one token") continue;
    EXPECT_GT(row["seconds"].get<double>(), 0.0) << row.dump();
    EXPECT_GT(row["bytes"].get<double>(), 0.0) << row.dump();
    // One layer each: q, k and gate|up in layer 0, q|k|v and gate, up in layer 1.
    const std::string type = row["type"];
    if (product == "v") EXPECT_EQ(type, "F16") << row.dump();
    if (product == "up") EXPECT_EQ(type, "Q8_0") << row.dump();
  }
  // No integer row for v (F16); the fused forms exist where a fused matrix does.
  const std::multiset<std::string> expected = {
      "float q|k|v", "float q",       "float k",       "float v",       "float o",         "float gate|up",
      "float gate",  "float up",      "float down",    "float lm_head", "fused q|k|v",     "fused gate|up",
      "fused lm_head", "int8 q|k|v",  "int8 q",        "int8 k",        "int8 o",          "int8 gate|up",
      "int8 gate",   "int8 up",       "int8 down",     "int8 lm_head",  "float one token", "fused one token",
      "int8 one token"};
  EXPECT_EQ(seen, expected);
}

// Runs `infinipot args` with stderr on a pseudo-terminal (stdout to /dev/null); what the
// terminal showed.
std::string run_on_terminal(const std::vector<std::string>& args) {
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  if (pid < 0) return "forkpty failed";
  if (pid == 0) {
    FILE* devnull = std::fopen("/dev/null", "w");
    if (devnull) dup2(fileno(devnull), STDOUT_FILENO);
    std::vector<std::string> all = {INFINIPOT_BIN_PATH};
    all.insert(all.end(), args.begin(), args.end());
    all = test::with_emulator(all);
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  std::string seen;
  char buf[4096];
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const ssize_t n = read(master, buf, sizeof buf);
    if (n > 0) seen.append(buf, static_cast<size_t>(n));
    else if (n < 0 && errno == EINTR) continue;
    else break;  // EIO once the child has closed the terminal
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(300)) {
      kill(pid, SIGKILL);
      break;
    }
  }
  close(master);
  int status = 0;
  waitpid(pid, &status, 0);
  return seen;
}

TEST_F(Bench, ProgressLineOnlyOnATerminal) {
  std::string doc;
  for (int i = 0; i < 40; ++i) doc += "The river town kept its " + std::to_string(i) + "th boat by the old mill. ";
  const std::string file = dir_.file("doc.txt");
  std::ofstream(file) << doc;
  const std::vector<std::string> args = {"run", "-m", model_, "-f", file, "-n", "2", "--chunk", "32", "--pot", "160"};
  const std::string tty = run_on_terminal(args);
  EXPECT_NE(tty.find("\033[K"), std::string::npos) << tty;  // the line is redrawn in place
  EXPECT_NE(tty.find("prefill "), std::string::npos) << tty;
  EXPECT_NE(tty.find(" tokens ("), std::string::npos) << tty;
  EXPECT_NE(tty.find("pot cycles"), std::string::npos) << tty;

  // Not a terminal (a pipe): no progress line, only the summary.
  const auto piped = test::run_infinipot(args, {{}, kRun});
  ASSERT_TRUE(test::succeeded(piped)) << piped.describe();
  EXPECT_EQ(piped.err.find("\033[K"), std::string::npos) << piped.err;
  EXPECT_EQ(piped.err.find(" tokens ("), std::string::npos) << piped.err;

  // --json on a terminal: nothing extra.
  std::vector<std::string> json_args = args;
  json_args.push_back("--json");
  const std::string tty_json = run_on_terminal(json_args);
  EXPECT_EQ(tty_json.find("\033[K"), std::string::npos) << tty_json;
}

}  // namespace
}  // namespace infinipot
