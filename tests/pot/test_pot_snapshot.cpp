// Pot snapshots: the format round-trips, every damaged or foreign file is refused with a
// message (never a crash), the committed fuzz seeds (tests/fuzz/corpus/pot_snapshot/) parse
// (INFINIPOT_REGEN_FUZZ_CORPUS=1 rewrites them) and the committed version 1 files (v1_seed*,
// written before the sliding-window store) are still read. Then through the real binary on a tiny model:
// the answer after --load-pot equals the answer of the run that saved it, for several
// policies; another model, another --kv-type, a truncated or modified file and bad flag
// combinations are clear errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "tests/kit/tiny_model.h"
#include "pot/pot_snapshot.h"
#include "tests/support/cli_process.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

using nlohmann::json;

// A small, consistent snapshot: 2 layers, 2 KV heads, head_dim 4, pot 8 holding 5 entries.
// window: the model has 3 sliding-window layers too (gemma3's layout: "LGLLG"), whose local
// store of 12 slots holds 7 entries.
PotSnapshot synthetic(bool half, bool h2o, bool window = false) {
  PotSnapshot s;
  s.model_id = "1234:00000000deadbeef";
  s.settings = {{"policy", h2o ? "h2o" : "infinipot"}, {"capacity", 8}, {"keep", 4}};
  s.n_layer = 2, s.n_head_kv = 2, s.head_dim = 4, s.capacity = 8, s.half = half;
  s.layer_kinds = window ? "LGLLG" : "GG";
  if (window) {
    s.window_capacity = 12, s.window_size = 7, s.window_next_position = 7;
    s.window_kv.resize(s.window_kv_bytes());
    for (size_t i = 0; i < s.window_kv.size(); ++i) s.window_kv[i] = uint8_t(i * 5 + 1);
  }
  s.size = 5, s.next_position = 5, s.pinned = 2, s.stream_pos = 12, s.last_token = 77, s.last_unit = 10;
  s.pending_nuc = 1.5f, s.cycles = 3, s.max_position = 9, s.tokens_read = 10;
  s.kept_total = 11, s.kept_least = 3, s.kept_most = 4;
  const size_t slots = s.slots();
  s.nuc.assign(slots, 0.25f);
  s.source.assign(slots, -1);
  s.unit.assign(slots, -1);
  s.position.assign(slots, 0);
  for (size_t i = 0; i < slots; ++i)
    if (int(i % 8) < s.size) s.source[i] = int(i % 8) * 2, s.unit[i] = int(i % 8) * 2, s.position[i] = int(i % 8);
  if (h2o) s.acc.assign(slots, 0.5f), s.mass.assign(slots, 0.125f);
  for (int i = 0; i < s.stream_pos; ++i) s.tokens.push_back(100 + i);
  s.kv.resize(s.kv_bytes());
  for (size_t i = 0; i < s.kv.size(); ++i) s.kv[i] = uint8_t(i * 7);
  return s;
}

std::string corpus_dir() {
  return std::string(INFINIPOT_TEST_SOURCE_DIR) + "/tests/fuzz/corpus/pot_snapshot";
}

TEST(PotSnapshotFormat, RoundTripsExactly) {
  for (bool window : {false, true})
    for (bool half : {false, true})
      for (bool h2o : {false, true}) {
        const PotSnapshot s = synthetic(half, h2o, window);
        const std::vector<uint8_t> bytes = serialize_pot_snapshot(s);
        const PotSnapshot p = parse_pot_snapshot(bytes.data(), bytes.size(), "mem");
        EXPECT_EQ(p.model_id, s.model_id);
        EXPECT_EQ(p.settings, s.settings);
        EXPECT_EQ(p.size, 5);
        EXPECT_EQ(p.half, half);
        EXPECT_EQ(p.kept_total, 11);  // a resumed pot reports what every distillation kept
        EXPECT_EQ(p.kept_least, 3);
        EXPECT_EQ(p.kept_most, 4);
        EXPECT_EQ(p.nuc, s.nuc);
        EXPECT_EQ(p.acc, s.acc);
        EXPECT_EQ(p.mass, s.mass);
        EXPECT_EQ(p.source, s.source);
        EXPECT_EQ(p.tokens, s.tokens);
        EXPECT_EQ(p.kv, s.kv);
        EXPECT_EQ(p.layer_kinds, s.layer_kinds);
        EXPECT_EQ(p.window_layers(), window ? 3 : 0);
        EXPECT_EQ(p.window_capacity, s.window_capacity);
        EXPECT_EQ(p.window_size, s.window_size);
        EXPECT_EQ(p.window_next_position, s.window_next_position);
        EXPECT_EQ(p.window_kv, s.window_kv);
        EXPECT_EQ(serialize_pot_snapshot(p), bytes);
      }
}

TEST(PotSnapshotFormat, EveryTruncationAndEveryFlippedByteIsRefused) {
  for (bool window : {false, true}) {
    SCOPED_TRACE(window ? "with a sliding-window store" : "global layers only");
    const std::vector<uint8_t> bytes = serialize_pot_snapshot(synthetic(false, false, window));
    for (size_t n = 0; n < bytes.size(); ++n)
      EXPECT_THROW(parse_pot_snapshot(bytes.data(), n, "cut"), std::invalid_argument) << "cut at " << n;
    std::vector<uint8_t> more = bytes;
    more.push_back(0);
    EXPECT_THROW(parse_pot_snapshot(more.data(), more.size(), "long"), std::invalid_argument);
    for (size_t i = 0; i < bytes.size(); ++i) {
      std::vector<uint8_t> b = bytes;
      b[i] ^= 0x40;
      EXPECT_THROW(parse_pot_snapshot(b.data(), b.size(), "flip"), std::invalid_argument) << "byte " << i;
    }
    try {
      parse_pot_snapshot(bytes.data(), bytes.size() - 3, "/tmp/x.pot");
      ADD_FAILURE() << "a cut snapshot was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("/tmp/x.pot"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("{save_pot}"), std::string::npos) << e.what();
    }
  }
}

// The message of parsing bytes that must be refused ("" if they parse).
std::string refusal(const PotSnapshot& s) {
  const std::vector<uint8_t> b = serialize_pot_snapshot(s);
  try {
    parse_pot_snapshot(b.data(), b.size(), "x.pot");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A header that is consistent JSON and passes the checksum but lies about the shape is still
// refused: the checks do not rely on the checksum.
TEST(PotSnapshotFormat, ConsistentChecksumButWrongShapeIsRefused) {
  PotSnapshot s = synthetic(false, false);
  s.source[0] = 99;  // points past the 12 tokens read
  std::vector<uint8_t> b = serialize_pot_snapshot(s);
  EXPECT_THROW(parse_pot_snapshot(b.data(), b.size(), "x"), std::invalid_argument);
  s = synthetic(false, false);
  s.tokens.pop_back();
  b = serialize_pot_snapshot(s);
  EXPECT_THROW(parse_pot_snapshot(b.data(), b.size(), "x"), std::invalid_argument);
  s = synthetic(false, false);
  s.kv.pop_back();
  b = serialize_pot_snapshot(s);
  EXPECT_THROW(parse_pot_snapshot(b.data(), b.size(), "x"), std::invalid_argument);
}

// The sliding-window store's fields are checked against each other and the layer kinds, with
// a message naming what is wrong, even when the checksum matches.
TEST(PotSnapshotFormat, InconsistentSlidingWindowStoreIsRefused) {
  PotSnapshot s = synthetic(false, false, true);
  s.window_kv.pop_back();
  EXPECT_NE(refusal(s).find("'window_kv' values where its shape needs"), std::string::npos) << refusal(s);
  s = synthetic(false, false, true);
  s.window_size = 13;  // past its capacity of 12
  EXPECT_NE(refusal(s).find("'window.size' = 13 out of range"), std::string::npos) << refusal(s);
  s = synthetic(false, false, true);
  s.window_next_position = 9;  // slot == position in the local store
  EXPECT_NE(refusal(s).find("'window.next_position' = 9 out of range"), std::string::npos) << refusal(s);
  s = synthetic(false, false, true);
  s.layer_kinds = "LLLLG";  // one global layer for a pot of two
  EXPECT_NE(refusal(s).find("1 global layers in 'layer_kinds' but a pot of 2"), std::string::npos) << refusal(s);
  s = synthetic(false, false, true);
  s.layer_kinds = "LGXLG";
  EXPECT_NE(refusal(s).find("'layer_kinds' that is not a string of G"), std::string::npos) << refusal(s);
  s = synthetic(false, false, false);
  s.window_capacity = 12;  // a store without local layers
  EXPECT_NE(refusal(s).find("'window.capacity' = 12 out of range"), std::string::npos) << refusal(s);
  EXPECT_EQ(refusal(synthetic(false, false, true)), "");
}

// seed0-3: global layers only; seed4-5: with a sliding-window store (f32, f16).
TEST(PotSnapshotFormat, CommittedFuzzSeedsParse) {
  const bool regen = std::getenv("INFINIPOT_REGEN_FUZZ_CORPUS") != nullptr;
  if (regen) std::filesystem::create_directories(corpus_dir());
  int i = 0;
  for (bool window : {false, true})
    for (bool half : {false, true})
      for (bool h2o : {false, true}) {
        if (window && h2o) continue;
        const std::string path = corpus_dir() + "/seed" + std::to_string(i++) + ".pot";
        const std::vector<uint8_t> want = serialize_pot_snapshot(synthetic(half, h2o, window));
        if (regen) test::write_file(path, want);
        ASSERT_TRUE(std::filesystem::exists(path)) << path << ": run with INFINIPOT_REGEN_FUZZ_CORPUS=1";
        const std::vector<uint8_t> got = test::read_file(path);
        EXPECT_EQ(got, want) << path;
        EXPECT_NO_THROW(parse_pot_snapshot(got.data(), got.size(), path));
      }
}

// Version 1 (llama only: no layer kinds, no local store) is still read. v1_seed0-3 were
// written by the version 1 serializer from synthetic(half, h2o) and are never regenerated:
// each parses to today's snapshot of the same state, all layers global.
TEST(PotSnapshotFormat, Version1FilesAreStillRead) {
  int i = 0;
  for (bool half : {false, true})
    for (bool h2o : {false, true}) {
      const std::string path = corpus_dir() + "/v1_seed" + std::to_string(i++) + ".pot";
      const std::vector<uint8_t> got = test::read_file(path);
      ASSERT_GT(got.size(), 12u) << path;
      EXPECT_EQ(got[8], 1) << path << " is not a version 1 file";
      const PotSnapshot p = parse_pot_snapshot(got.data(), got.size(), path);
      EXPECT_EQ(p.layer_kinds, "GG");
      EXPECT_EQ(p.window_layers(), 0);
      EXPECT_TRUE(p.window_kv.empty());
      PotSnapshot want = synthetic(half, h2o);
      EXPECT_EQ(p.kept_total, 0) << "written before --keep auto recorded what distillations kept";
      want.kept_total = 0, want.kept_least = want.kept_most = 0;
      EXPECT_EQ(serialize_pot_snapshot(p), serialize_pot_snapshot(want));
    }
  // A version this program does not know is refused, naming the versions it reads.
  std::vector<uint8_t> b = serialize_pot_snapshot(synthetic(false, false));
  b[8] = 3;
  try {
    parse_pot_snapshot(b.data(), b.size(), "v3.pot");
    ADD_FAILURE() << "version 3 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("format version 3; this program reads versions 1 to 2"), std::string::npos)
        << e.what();
  }
}

// ---- Through the binary ----------------------------------------------------------------

class PotSnapshotCli : public ::testing::Test {
 protected:
  void SetUp() override {
    TinyLlamaOptions o;
    o.n_ctx = 4096;
    model_ = dir_.file("tiny.gguf");
    write_tiny_llama(model_, o);
    o.seed = 43;
    other_model_ = dir_.file("other.gguf");
    write_tiny_llama(other_model_, o);
    std::string text;
    for (int i = 0; i < 50; ++i)
      text += "On day " + std::to_string(i + 1) + " the courier carried parcel " + std::to_string(3000 + 17 * i) +
              " to the mill. ";
    doc_ = dir_.file("doc.txt");
    std::ofstream(doc_) << text;
  }
  json run_json(std::vector<std::string> args, const std::string& model = "") {
    args.insert(args.begin(), {"run", "-m", model.empty() ? model_ : model});
    args.push_back("--json");
    const auto r = test::run_infinipot(args, {{}, 600});
    EXPECT_TRUE(test::succeeded(r)) << r.describe();
    return r.exit_code == 0 ? json::parse(r.out) : json::object();
  }
  test::ProcResult run(std::vector<std::string> args, const std::string& model = "") {
    args.insert(args.begin(), {"run", "-m", model.empty() ? model_ : model});
    return test::run_infinipot(args, {{}, 600});
  }
  test::TempDir dir_;
  std::string model_, other_model_, doc_;
};

TEST_F(PotSnapshotCli, AnswerAfterLoadEqualsTheAnswerOfTheRunThatSaved) {
  for (const std::string policy : {"infinipot", "h2o", "streaming"}) {
    SCOPED_TRACE(policy);
    const std::string pot = dir_.file(policy + ".pot");
    const json saved = run_json({"-f", doc_, "-q", "Which parcel went on day 7?", "--pot", "160", "--policy", policy,
                                 "-n", "12", "--chunk", "32", "--save-pot", pot});
    ASSERT_TRUE(std::filesystem::exists(pot));
    EXPECT_FALSE(std::filesystem::exists(pot + ".partial"));
    EXPECT_GT(saved["ccd_cycles"].get<int>(), 1);
    const json loaded = run_json({"--load-pot", pot, "-q", "Which parcel went on day 7?", "-n", "12", "--chunk", "32"});
    EXPECT_EQ(loaded["text"], saved["text"]);
    EXPECT_EQ(loaded["generated_tokens"], saved["generated_tokens"]);
    EXPECT_EQ(loaded["pot"]["capacity"], 160);
    EXPECT_EQ(loaded["pot"]["policy"], policy);
    EXPECT_EQ(loaded["ccd_cycles"], saved["ccd_cycles"]);  // nothing more was read
    EXPECT_LT(loaded["prompt_tokens"].get<int>(), saved["prompt_tokens"].get<int>() / 4);
    // Another question about the same saved pot works too.
    const json other = run_json({"--load-pot", pot, "-q", "Where did the courier go?", "-n", "4"});
    EXPECT_EQ(other["generated_tokens"].get<int>() + (other["stop_reason"] == "eos"), 4);
  }
}

TEST_F(PotSnapshotCli, ForeignDamagedOrMisusedSnapshotsAreClearErrors) {
  const std::string pot = dir_.file("a.pot");
  run_json({"-f", doc_, "-q", "Which parcel?", "--pot", "160", "-n", "2", "--kv-type", "f32", "--save-pot", pot});
  const double kQuick = 60;
  EXPECT_TRUE(test::fails_cleanly(run({"--load-pot", pot, "-q", "Which parcel?"}, other_model_),
                                  {"another model", "a.pot"}, 1, kQuick));
  EXPECT_TRUE(test::fails_cleanly(run({"--load-pot", pot, "-q", "Which parcel?", "--kv-type", "f16"}),
                                  {"f32", "--kv-type"}, 1, kQuick));
  std::vector<uint8_t> bytes = test::read_file(pot);
  const std::string cut = dir_.file("cut.pot"), flipped = dir_.file("flipped.pot");
  test::write_file(cut, std::vector<uint8_t>(bytes.begin(), bytes.begin() + bytes.size() / 2));
  bytes[bytes.size() / 3] ^= 1;
  test::write_file(flipped, bytes);
  EXPECT_TRUE(test::fails_cleanly(run({"--load-pot", cut, "-q", "Which parcel?"}), {"cut.pot", "checksum"}, 1, kQuick));
  EXPECT_TRUE(test::fails_cleanly(run({"--load-pot", flipped, "-q", "Which parcel?"}), {"flipped.pot", "checksum"}, 1,
                                  kQuick));
  EXPECT_TRUE(test::fails_cleanly(run({"--load-pot", dir_.file("none.pot"), "-q", "Q"}), {"none.pot"}, 1, kQuick));
  EXPECT_TRUE(test::fails_cleanly(run({"--load-pot", doc_, "-q", "Q"}), {"doc.txt", "IPOTSNAP"}, 1, kQuick));
  // Flags that do not go with a saved pot are usage errors (exit 2).
  EXPECT_TRUE(test::fails_cleanly(run({"--load-pot", pot, "-q", "Q", "-f", doc_}), {"--load-pot", "-f"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(run({"--load-pot", pot}), {"--load-pot", "-q"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(run({"--load-pot", pot, "-q", "Q", "--pot", "64"}), {"--load-pot", "--pot"}, 2, kQuick));
  EXPECT_TRUE(test::fails_cleanly(run({"-f", doc_, "--save-pot", dir_.file("f.pot")}), {"--save-pot", "--pot"}, 2,
                                  kQuick));
  EXPECT_TRUE(test::fails_cleanly(run({"-f", doc_, "--pot", "160", "-n", "2", "--save-pot", dir_.file("no/dir/f.pot")}),
                                  {"--save-pot", "no/dir/f.pot"}, 1, kQuick));
  // A directory is named as one, on load and on save.
  EXPECT_TRUE(test::fails_cleanly(run({"--load-pot", dir_.path(), "-q", "Q"}), {"--load-pot", "is a directory"}, 1,
                                  kQuick));
  EXPECT_TRUE(test::fails_cleanly(run({"-f", doc_, "--pot", "160", "-n", "2", "--save-pot", dir_.path()}),
                                  {"--save-pot", "is a directory"}, 1, kQuick));
}

}  // namespace
}  // namespace infinipot
