// `infinipot nih --task` through the real binary: usage errors, needles in other words,
// every task end to end on a tiny random-weight model (records, scores, resume), the
// ablation settings reaching the pot, and shared prefixes and checkpoints ending exactly as
// whole reads do. The generators and scorers themselves are in test_tasks.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "engine/answer.h"
#include "engine/nih.h"
#include "engine/tasks/task_registry.h"
#include "tests/support/cli_process.h"
#include "tests/support/gguf_test_util.h"
#include "tests/support/tiny_tokenizer.h"

namespace infinipot::nih {
namespace {

constexpr double kQuick = 30;

TEST(TaskCli, UnknownTaskAndMisplacedQuestionAreUsageErrors) {
  const std::string model = test::real_model_path();
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--task", "niah"}),
                                  {"--task", "'niah'", "passkey", "niah_single", "niah_uuid", "niah_multikey",
                                   "niah_multivalue", "niah_multiquery", "vt", "cwe"},
                                  2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--task", "vt,,cwe"}), {"--task"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--task", "niah_single", "--question", "Q?"}),
                                  {"--question", "niah_single"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--task", "passkey,vt", "--needle",
                                                       "The code is {key}."}),
                                  {"--needle", "vt"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--needle", "The code is 12345."}),
                                  {"--needle", "{key}"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--needle", " {key} "}),
                                  {"--needle", "words"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--needle", ""}), {"--needle", "{key}"}, 2,
                                  kQuick));
  EXPECT_TRUE(test::fails_cleanly(test::run_infinipot({"nih", "-m", model, "--question", " "}), {"--question", "empty"}, 2,
                                  kQuick));
}

// --needle end to end on the tiny model: the records carry the wording, and the usual
// wording's trials are not taken as done by it (nor the other way round).
TEST(TaskCli, ANeedleInOtherWordsRunsAsTrialsOfItsOwn) {
  test::TempDir dir;
  const std::string model = test::tiny_model(dir, 2048), out = dir.file("r.jsonl");
  const std::vector<std::string> usual = {"nih", "-m", model, "--lengths", "600", "--depths", "0.5",
                                          "--trials", "1", "--policy", "full", "-n", "2", "--out", out};
  std::vector<std::string> reworded = usual;
  reworded.insert(reworded.end(), {"--needle", "The vault opens with {key}."});
  auto r = test::run_infinipot(reworded, {{}, 300});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  EXPECT_NE(r.err.find("1 trials to run, 0 already"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("### passkey (needle \"The vault opens with {key}.\"): pass key found"), std::string::npos) << r.out;
  r = test::run_infinipot(usual, {{}, 300});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  EXPECT_NE(r.err.find("1 trials to run, 0 already"), std::string::npos) << "another wording's trial is not this one's\n" << r.err;
  r = test::run_infinipot(reworded, {{}, 120});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  EXPECT_NE(r.err.find("0 trials to run, 1 already"), std::string::npos) << r.err;
  const Results res = load_results(out);
  ASSERT_EQ(res.records.size(), 2u);
  EXPECT_EQ(res.records[0].at("needle"), "The vault opens with {key}.");
  EXPECT_FALSE(res.records[1].contains("needle")) << "the usual wording's records stay as they were";
  EXPECT_EQ(res.records[0].at("key"), res.records[1].at("key")) << "the same key in other words";
}

// One tiny trial of every task through the real binary on a random-weight model: the
// records carry the task, its references and score, the task's -n, and a rerun skips them.
TEST(TaskCli, EveryTaskRunsEndToEndAndResumes) {
  test::TempDir dir;
  const std::string model = test::tiny_model(dir, 2048), out = dir.file("r.jsonl");
  std::string all;
  for (const auto& t : tasks()) all += (all.empty() ? "" : ",") + std::string(t->name());
  const std::vector<std::string> args = {"nih",    "-m",       model,   "--task", all,      "--lengths", "900",
                                         "--depths", "0.5",    "--trials", "1",   "--policy", "full",     "--out", out};
  auto r = test::run_infinipot(args, {{}, 600});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  const Results res = load_results(out);
  ASSERT_EQ(res.records.size(), tasks().size());
  std::set<std::string> seen;
  for (const auto& rec : res.records) {
    SCOPED_TRACE(rec.dump());
    ASSERT_FALSE(rec.contains("error"));
    const Task& t = find_task(rec.at("task").get<std::string>());
    seen.insert(t.name());
    EXPECT_EQ(rec.at("n_predict"), t.default_n_predict());
    EXPECT_FALSE(rec.at("references").empty());
    EXPECT_EQ(rec.at("key"), rec.at("references")[0]);
    const double score = rec.at("score").get<double>();
    EXPECT_GE(score, 0.0);
    EXPECT_LE(score, 1.0);
    EXPECT_EQ(rec.at("found").get<bool>(), score == 1.0);
    // The score is the task's rule applied to the recorded answer.
    EXPECT_EQ(score, t.score(rec.at("answer"), rec.at("references").get<std::vector<std::string>>()).fraction);
    EXPECT_LE(std::abs(rec.at("doc_tokens").get<int>() - 900), 9);
    // CPU time of the trial: some was spent, and no more than all cores busy for its wall time.
    const double cpu = rec.at("cpu_s").get<double>(), wall = rec.at("wall_s").get<double>();
    EXPECT_GT(cpu, 0.0);
    EXPECT_LE(cpu, wall * std::max(1u, std::thread::hardware_concurrency()) + 0.05);
  }
  EXPECT_EQ(seen.size(), tasks().size());
  // Every record names the build that produced it, as `infinipot --version` does.
  const std::string build = test::infinipot_build_id();
  ASSERT_FALSE(build.empty());
  for (const auto& rec : res.records) EXPECT_EQ(rec.at("build"), build);
  // A rerun has nothing left to do; -n overrides every task's default for new trials.
  r = test::run_infinipot(args, {{}, 120});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  EXPECT_NE(r.err.find("0 trials to run, 8 already"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("### vt on passkey: all 5 variables found"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("### passkey: pass key found"), std::string::npos) << r.out;
  std::vector<std::string> more = args;
  more[4] = "niah_single";
  more[10] = "2";  // --trials
  more.insert(more.end(), {"-n", "3"});
  r = test::run_infinipot(more, {{}, 300});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  EXPECT_NE(r.err.find("1 trials to run, 1 already"), std::string::npos) << r.err;
  const Results again = load_results(out);
  ASSERT_EQ(again.records.size(), tasks().size() + 1);
  EXPECT_EQ(again.records.back().at("n_predict"), 3);
  EXPECT_EQ(again.records.back().at("trial"), 1);
}

// The ablations of --policy reach the pot: one passkey trial each on the tiny model. The
// records say what the pot saw: CaP-G's catalyst is the general prompt's length, not the
// question's, and without CR-RoPE the highest key position runs past the pot's size.
TEST(TaskCli, CatalystAndCrRopeAblationsReachThePot) {
  test::TempDir dir;
  const std::string model = test::tiny_model(dir, 2048), out = dir.file("r.jsonl");
  const std::string policies = "infinipot:pot=256,infinipot:pot=256:cr_rope=0,infinipot:pot=256:catalyst=general";
  auto r = test::run_infinipot({"nih", "-m", model, "--lengths", "900", "--depths", "0.5", "--trials", "1", "-n", "4",
                                "--policy", policies, "--out", out},
                               {{}, 300});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  std::map<std::string, nlohmann::json> by_config;
  for (const auto& rec : load_results(out).records) by_config[rec.at("config").get<std::string>()] = rec;
  ASSERT_EQ(by_config.size(), 3u);
  for (const auto& [config, rec] : by_config) {
    SCOPED_TRACE(rec.dump());
    ASSERT_FALSE(rec.contains("error"));
    EXPECT_GT(rec.at("ccd_cycles").get<int>(), 0) << "900 tokens through a 256-entry pot distill";
  }
  const auto& base = by_config.at("infinipot:pot=256");
  const auto& no_rope = by_config.at("infinipot:pot=256:cr_rope=0");
  const auto& general = by_config.at("infinipot:pot=256:catalyst=general");
  EXPECT_LT(base.at("max_position").get<int>(), 256);
  EXPECT_LT(general.at("max_position").get<int>(), 256);
  EXPECT_GE(no_rope.at("max_position").get<int>(), base.at("prompt_tokens").get<int>() - 1)
      << "stream positions are kept: the last prompt token sits at its place in the stream";
  // The catalyst is "\n\n" + its text + the template's tail (Engine::catalyst_prompt).
  const auto count = test::tiny_token_counter();
  EXPECT_EQ(general.at("catalyst_tokens").get<int>() - base.at("catalyst_tokens").get<int>(),
            count(std::string("\n\n") + kGeneralCatalyst) - count(std::string("\n\n") + kQuestion));
  EXPECT_EQ(no_rope.at("catalyst_tokens"), base.at("catalyst_tokens"));
  EXPECT_EQ(general.at("question"), kQuestion) << "CaP-G changes the catalyst, not the question asked";
}

// Trials that share a document prefix resume from a snapshot of the pot (engine/prefix_forks.h)
// and must end exactly where a full read ends: the same answers, needle retention, cycles and
// positions (and the question's attention on the needle) as --no-prefix-sharing, for a scoring policy, an accumulating one (H2O), a
// recency one and a whole-input one (SnapKV: every trial of a cell holds the largest prompt's
// entries, so their stores have one size), on both kinds of haystack.
TEST(TaskCli, SharedPrefixesGiveTheRecordsOfFullReads) {
  test::TempDir dir;
  const std::string model = test::tiny_model(dir, 4096);
  auto run = [&](const std::string& out, bool share) {
    std::vector<std::string> args = {"nih", "-m", model, "--lengths", "1500", "--depths", "0.2,0.6,0.9", "--trials", "2",
                                     "-n", "4", "--haystacks", "passkey,prose", "--chunk", "64",
                                     "--policy", "infinipot:pot=256,h2o:pot=256,streaming:pot=256,snapkv:pot=256", "--out", out, "--pot-text",
                                     "--needle-attention"};
    if (!share) args.push_back("--no-prefix-sharing");
    auto r = test::run_infinipot(args, {{}, 900});
    EXPECT_TRUE(test::succeeded(r)) << r.describe();
    std::map<std::string, nlohmann::json> by_trial;
    for (const auto& rec : load_results(out).records)
      by_trial[trial_id(rec)] = rec;
    return by_trial;
  };
  const auto shared = run(dir.file("shared.jsonl"), true);
  const auto alone = run(dir.file("alone.jsonl"), false);
  ASSERT_EQ(shared.size(), 48u);
  ASSERT_EQ(alone.size(), shared.size());
  int resumed = 0;
  for (const auto& [id, rec] : shared) {
    SCOPED_TRACE(rec.dump());
    const auto& ref = alone.at(id);
    ASSERT_FALSE(rec.contains("error"));
    resumed += rec.at("resumed_at").get<int>() > 0;
    EXPECT_FALSE(ref.contains("resumed_at"));
    for (const char* field : {"answer", "found", "needle_kept", "ccd_cycles", "max_position", "prompt_tokens", "doc_tokens",
                              "pot_digest", "pot_text", "needle_attention"})
      EXPECT_EQ(rec.at(field), ref.at(field)) << field;
    // --needle-attention: the question's share on the needle, per layer, from the policies with
    // a catalyst (CaP's measure; SnapKV's observation window); null for the others.
    if (rec.at("policy") == "infinipot" || rec.at("policy") == "snapkv")
      EXPECT_TRUE(rec.at("needle_attention").at("share_per_layer").is_array());
    else
      EXPECT_TRUE(rec.at("needle_attention").is_null());
    // --pot-text: what the pot held, with the gaps its distillations left.
    EXPECT_NE(rec.at("pot_text").get<std::string>().find("[\u2026"), std::string::npos);
  }
  // 2 haystacks x 4 policies x 6 trials: all but the first of each group (the deepest needle)
  // share at least the 64-token chunks before the shallowest needle (at ~300 tokens).
  EXPECT_EQ(resumed, 2 * 4 * 5) << "every trial but the first of a group starts from a shared prefix";
}

// --checkpoint-dir: a run that stops inside a trial (here after its third save, as a killed
// run would) leaves the trial's pot on disk; the next run starts the trial from it and records
// what a whole read records. An unreadable checkpoint is removed with a warning and the trial
// read from its start. Files go once their trials are recorded.
TEST(TaskCli, CheckpointedTrialsEndAsWholeReads) {
  test::TempDir dir;
  const std::string model = test::tiny_model(dir, 4096);
  const std::string ckdir = dir.file("checkpoints");
  const std::string policies = "infinipot:pot=256,h2o:pot=256,snapkv:pot=256";
  auto run = [&](const std::string& out, const std::string& policy, std::vector<std::string> extra,
                 const std::string& chunk = "64") {
    std::vector<std::string> args = {"nih", "-m", model, "--lengths", "1500", "--depths", "0.5", "--trials", "1",
                                     "-n", "4", "--haystacks", "passkey", "--chunk", chunk,
                                     "--policy", policy, "--out", out};
    args.insert(args.end(), extra.begin(), extra.end());
    return test::run_infinipot(args, {{}, 900});
  };
  auto records = [&](const std::string& out) {
    std::map<std::string, nlohmann::json> by_policy;
    for (const auto& rec : load_results(out).records) by_policy[rec.at("policy")] = rec;
    return by_policy;
  };
  auto files = [&] {
    std::vector<std::string> names;
    if (std::filesystem::exists(ckdir))
      for (const auto& e : std::filesystem::directory_iterator(ckdir)) names.push_back(e.path().string());
    return names;
  };
  const auto whole = run(dir.file("whole.jsonl"), policies, {});
  ASSERT_TRUE(test::succeeded(whole)) << whole.describe();
  const auto ref = records(dir.file("whole.jsonl"));
  ASSERT_EQ(ref.size(), 3u);

  const std::vector<std::string> ck = {"--checkpoint-dir", ckdir, "--checkpoint-every", "0"};
  // A scoring policy, an accumulating one (H2O carries its sums) and a whole-input one; then
  // a file that is not a pot.
  for (const std::string policy : {"infinipot", "h2o", "snapkv", "corrupt"}) {
    SCOPED_TRACE(policy);
    const bool corrupt = policy == "corrupt";
    const std::string out = dir.file(policy + ".jsonl");
    const std::string spec = (corrupt ? "infinipot" : policy) + ":pot=256";
    std::vector<std::string> stop = ck;
    stop.insert(stop.end(), {"--checkpoint-stop", "3"});
    const auto stopped = run(out, spec, stop);
    EXPECT_EQ(stopped.exit_code, 75) << stopped.describe();
    EXPECT_TRUE(records(out).empty()) << "it stopped inside its trial";
    ASSERT_EQ(files().size(), 1u) << "the stopped trial's pot is on disk";
    if (corrupt) std::ofstream(files()[0], std::ios::binary | std::ios::trunc) << "not a pot";
    const auto resumed = run(out, spec, ck);
    ASSERT_TRUE(test::succeeded(resumed)) << resumed.describe();
    EXPECT_EQ(resumed.err.find("unreadable checkpoint") != std::string::npos, corrupt) << resumed.err;
    EXPECT_TRUE(files().empty()) << "a recorded trial's checkpoint goes";
    const auto got = records(out);
    ASSERT_EQ(got.size(), 1u);
    const nlohmann::json& rec = got.begin()->second;
    SCOPED_TRACE(rec.dump());
    ASSERT_FALSE(rec.contains("error"));
    EXPECT_EQ(rec.contains("checkpoint_at"), !corrupt) << "the stopped trial starts from its save";
    if (!corrupt) {  // three chunks read (of at most 64: the pot's room cuts some short)
      EXPECT_GT(rec.at("checkpoint_at").get<int>(), 3);
      EXPECT_LE(rec.at("checkpoint_at").get<int>(), 3 * 64);
      EXPECT_EQ(rec.at("resumed_at"), rec.at("checkpoint_at"));
    }
    for (const char* field : {"answer", "found", "needle_kept", "ccd_cycles", "max_position", "prompt_tokens", "pot_digest"})
      EXPECT_EQ(rec.at(field), ref.at(rec.at("policy").get<std::string>()).at(field)) << field;
  }
  // A checkpoint saved with other pot settings (H2O's pot under infinipot's trial, as a file
  // from another build would be): the trial becomes an error record naming it, the file goes,
  // and the next run reads the trial whole.
  {
    const std::string out = dir.file("foreign.jsonl");
    std::vector<std::string> stop = ck;
    stop.insert(stop.end(), {"--checkpoint-stop", "3"});
    EXPECT_EQ(run(out, "infinipot:pot=256", stop).exit_code, 75);
    ASSERT_EQ(files().size(), 1u);
    const std::string mine = files()[0];
    EXPECT_EQ(run(dir.file("other.jsonl"), "h2o:pot=256", stop).exit_code, 75);
    ASSERT_EQ(files().size(), 2u);
    const std::string other = files()[0] == mine ? files()[1] : files()[0];
    std::filesystem::rename(other, mine);
    run(out, "infinipot:pot=256", ck);
    const auto failed = records(out);
    ASSERT_EQ(failed.size(), 1u);
    EXPECT_EQ(failed.begin()->second.value("error", "").rfind("checkpoint: ", 0), 0u) << failed.begin()->second.dump();
    EXPECT_TRUE(files().empty()) << "the foreign checkpoint goes";
    const auto again = run(out, "infinipot:pot=256", ck);
    ASSERT_TRUE(test::succeeded(again)) << again.describe();
    nlohmann::json last;
    for (const auto& rec : load_results(out).records) last = rec;
    ASSERT_FALSE(last.contains("error")) << last.dump();
    EXPECT_FALSE(last.contains("checkpoint_at"));
    EXPECT_EQ(last.at("pot_digest"), ref.at("infinipot").at("pot_digest"));
  }
  // A pot saved under another chunk is not this trial's: the pot at a chunk boundary depends
  // on the chunking, so a run with --chunk 32 reads the trial whole, as a run without
  // checkpoints does, and leaves the other run's file alone.
  {
    std::vector<std::string> stop = ck;
    stop.insert(stop.end(), {"--checkpoint-stop", "3"});
    const std::string out = dir.file("chunk.jsonl");
    EXPECT_EQ(run(out, "infinipot:pot=256", stop).exit_code, 75);
    ASSERT_EQ(files().size(), 1u);
    const auto other_chunk = run(out, "infinipot:pot=256", ck, "32");
    ASSERT_TRUE(test::succeeded(other_chunk)) << other_chunk.describe();
    const auto got = records(out);
    ASSERT_EQ(got.size(), 1u);
    const nlohmann::json& rec = got.begin()->second;
    EXPECT_FALSE(rec.contains("checkpoint_at")) << rec.dump();
    EXPECT_EQ(files().size(), 1u) << "the --chunk 64 run's pot stays for that run";
    const auto whole32 = run(dir.file("whole32.jsonl"), "infinipot:pot=256", {}, "32");
    ASSERT_TRUE(test::succeeded(whole32)) << whole32.describe();
    EXPECT_EQ(rec.at("pot_digest"), records(dir.file("whole32.jsonl")).at("infinipot").at("pot_digest"));
  }
}

}  // namespace
}  // namespace infinipot::nih
