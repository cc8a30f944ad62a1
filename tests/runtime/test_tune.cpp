// platforms/tuning.json as the one source of tuning defaults, and `infinipot tune` through the
// real binary on a tiny model: it tries every key's candidates and CLBlast configurations,
// writes the winners under this device's entry, and the program then picks that entry up.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/context.h"
#include "runtime/tuning.h"
#include "tests/support/cli_process.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

using nlohmann::json;

std::vector<const char*> key_names() {
  std::vector<const char*> names;
  for (const cl::TuningKey& k : cl::tuning_keys()) names.push_back(k.name);
  return names;
}

json committed_tuning() {
  std::ifstream in(std::string(INFINIPOT_TEST_SOURCE_DIR) + "/platforms/tuning.json");
  return json::parse(in);
}

TEST(Tuning, TheJsonDefaultGivesEveryKey) {
  const json d = committed_tuning()["default"];
  for (const char* k : key_names()) EXPECT_TRUE(d.contains(k)) << k;
  // And those are the values a device no entry matches gets (nothing else supplies defaults).
  const cl::DeviceInfo unknown{};
  const json t = cl::lookup_tuning(unknown).to_json();
  for (const char* k : key_names())
    if (std::string(k) != "gemm_tile_rows" || d[k] != "auto") EXPECT_EQ(t[k], d[k]) << k;
}

// Every measured device entry (the NVIDIA H200's, written by `infinipot tune` on that card) is
// what a device of that name on that vendor's platform gets, key for key.
TEST(Tuning, EveryDeviceEntryIsWhatItsDeviceGets) {
  const json data = committed_tuning();
  int entries = 0;
  for (const auto& [vendor, v] : data["vendors"].items()) {
    if (!v.is_object() || !v.contains("devices")) continue;
    std::string platform;  // a platform name the vendor's first alias matches
    for (const auto& alias : data["vendor_aliases"])
      if (alias[0] == vendor) { platform = alias[1].get<std::string>(); break; }
    ASSERT_FALSE(platform.empty()) << vendor << " has no vendor alias";
    for (const auto& [name, entry] : v["devices"].items()) {
      cl::DeviceInfo dev{};
      dev.platform_name = platform;
      dev.name = name;
      const json got = cl::lookup_tuning(dev).to_json();
      EXPECT_EQ(got["vendor"], vendor) << name;
      EXPECT_EQ(got["device"], name) << name;
      for (const char* k : key_names())
        if (entry.contains(k)) EXPECT_EQ(got[k], entry[k]) << vendor << " / " << name << ": " << k;
      ++entries;
    }
  }
  EXPECT_GE(entries, 1) << "no measured device entry in platforms/tuning.json";
  cl::DeviceInfo h200{};
  h200.platform_name = "NVIDIA CUDA", h200.vendor = "NVIDIA Corporation", h200.name = "NVIDIA H200";
  const cl::Tuning t = cl::lookup_tuning(h200);
  EXPECT_EQ(t.device_key, "nvidia h200");
  EXPECT_EQ(t.gemm_backend, "clblast");
  EXPECT_TRUE(t.matvec_int8.empty()) << "the integer decode products missed llama.cpp's bound on that card";
  cl::DeviceInfo h100 = h200;
  h100.name = "NVIDIA H100 80GB HBM3";
  const cl::Tuning h = cl::lookup_tuning(h100);
  EXPECT_EQ(h.device_key, "nvidia h100");
  EXPECT_EQ(h.attention_decode_split, 64) << "the split took decode from 0.857 s to 0.213 s there";
  EXPECT_TRUE(h.matvec_int8.empty()) << "the integer products stay off until the reference test passes there";
}

// gemm_tile_rows "auto": 8 rows of 16-float accumulators where the native float vector is 16
// wide (AVX-512 has 32 such registers), 6 where it is 8 wide (AVX2: 12 of its 16 registers;
// 8 rows would spill), 4 where it is narrower (a GPU's scalar width).
TEST(Tuning, GemmTileRowsAutoFollowsTheNativeVectorWidth) {
  cl::DeviceInfo avx512{}, avx2{}, gpu{};
  avx512.native_float_width = 16;
  avx2.native_float_width = 8;
  gpu.native_float_width = 1;
  EXPECT_EQ(cl::lookup_tuning(avx512, {{"gemm_tile_rows", "auto"}}).gemm_tile_rows, 8);
  EXPECT_EQ(cl::lookup_tuning(avx2, {{"gemm_tile_rows", "auto"}}).gemm_tile_rows, 6);
  EXPECT_EQ(cl::lookup_tuning(gpu, {{"gemm_tile_rows", "auto"}}).gemm_tile_rows, 4);
  EXPECT_EQ(cl::lookup_tuning(avx512, {{"gemm_tile_rows", 4}}).gemm_tile_rows, 4) << "a number is taken as given";
  EXPECT_EQ(cl::lookup_tuning(avx2, {{"gemm_tile_rows", 6}}).gemm_tile_rows, 6);
  for (const json bad : {json(5), json(12), json("wide"), json(0)}) {
    try {
      (void)cl::lookup_tuning(avx2, {{"gemm_tile_rows", bad}});
      ADD_FAILURE() << "accepted gemm_tile_rows " << bad.dump();
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("gemm_tile_rows"), std::string::npos) << e.what();
    }
  }
}

// attention_vec16_rows: "auto" (0, resolved at launch) or 4, 8 or 16 rows (vector lanes);
// written back as it was read.
TEST(Tuning, AttentionVec16RowsAreAutoOrACount) {
  const cl::DeviceInfo dev{};
  EXPECT_EQ(cl::lookup_tuning(dev, {{"attention_vec16_rows", "auto"}}).attention_vec16_rows, 0);
  EXPECT_EQ(cl::lookup_tuning(dev, {{"attention_vec16_rows", 8}}).attention_vec16_rows, 8);
  EXPECT_EQ(cl::lookup_tuning(dev, {{"attention_vec16_rows", "auto"}}).to_json()["attention_vec16_rows"], "auto");
  EXPECT_EQ(cl::lookup_tuning(dev, {{"attention_vec16_rows", 8}}).to_json()["attention_vec16_rows"], 8);
  for (const json bad : {json(0), json(2), json(12), json(32), json("many"), json(2.5)}) {
    try {
      (void)cl::lookup_tuning(dev, {{"attention_vec16_rows", bad}});
      ADD_FAILURE() << "accepted attention_vec16_rows " << bad.dump();
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("attention_vec16_rows"), std::string::npos) << e.what();
    }
  }
}

TEST(Tuning, AFileWhoseDefaultLacksAKeyIsRefusedNamingIt) {
  test::TempDir dir;
  json data = committed_tuning();
  data["default"].erase("attention_key_tile");
  const std::string path = dir.file("t.json");
  std::ofstream(path) << data.dump();
  setenv("INFINIPOT_PLATFORMS_FILE", path.c_str(), 1);
  try {
    (void)cl::lookup_tuning(cl::DeviceInfo{});
    ADD_FAILURE() << "accepted a default without attention_key_tile";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("attention_key_tile"), std::string::npos) << e.what();
  }
  unsetenv("INFINIPOT_PLATFORMS_FILE");
}

TEST(Tuning, OverridesAreCheckedLikeTheFile) {
  EXPECT_EQ(cl::lookup_tuning(cl::DeviceInfo{}, {{"matvec_local", 8}}).matvec_local, 8);
  EXPECT_THROW((void)cl::lookup_tuning(cl::DeviceInfo{}, {{"matvec_local", 0}}), std::exception);
  EXPECT_THROW((void)cl::lookup_tuning(cl::DeviceInfo{}, {{"gemm_backend", "cublas"}}), std::exception);
  EXPECT_EQ(cl::lookup_tuning(cl::DeviceInfo{}, {{"matvec_int8", {"Q4_1"}}}).matvec_int8,
            std::vector<std::string>{"Q4_1"});
  EXPECT_THROW((void)cl::lookup_tuning(cl::DeviceInfo{}, {{"matvec_int8", true}}), std::exception);
  EXPECT_TRUE(cl::lookup_tuning(cl::DeviceInfo{}, {{"matvec_fusion", true}}).matvec_fusion);
  EXPECT_FALSE(cl::lookup_tuning(cl::DeviceInfo{}, {{"matvec_fusion", false}}).matvec_fusion);
  EXPECT_THROW((void)cl::lookup_tuning(cl::DeviceInfo{}, {{"matvec_fusion", "yes"}}), std::exception);
  EXPECT_FALSE(cl::lookup_tuning(cl::DeviceInfo{}, {{"matvec_norm_fusion", false}}).matvec_norm_fusion);
  EXPECT_TRUE(cl::lookup_tuning(cl::DeviceInfo{}, {{"matvec_norm_fusion", true}}).matvec_norm_fusion);
  EXPECT_THROW((void)cl::lookup_tuning(cl::DeviceInfo{}, {{"matvec_norm_fusion", 1}}), std::exception);
  EXPECT_THROW((void)cl::lookup_tuning(cl::DeviceInfo{}, {{"matvec_int8", {"Q6_K"}}}), std::exception);
  EXPECT_EQ(cl::lookup_tuning(cl::DeviceInfo{}, {{"matvec_prefetch", 4096}}).matvec_prefetch, 4096);
  EXPECT_EQ(cl::lookup_tuning(cl::DeviceInfo{}, {{"matvec_prefetch", 0}}).matvec_prefetch, 0);
  for (const nlohmann::json& bad : {nlohmann::json(-64), nlohmann::json(100), nlohmann::json(131072), nlohmann::json("on")})
    EXPECT_THROW((void)cl::lookup_tuning(cl::DeviceInfo{}, {{"matvec_prefetch", bad}}), std::exception) << bad.dump();
}

// The table is the one source: every value `tune` tries is one the file may give, reads back
// as itself, and a value of the wrong kind is refused naming its key.
TEST(Tuning, EveryCandidateIsAValueTheFileMayGive) {
  for (const cl::TuningKey& k : cl::tuning_keys()) {
    SCOPED_TRACE(k.name);
    EXPECT_GT(std::string(k.doc).size(), 10u);
    EXPECT_GE(k.candidates.size(), 2u);
    for (const json& v : k.candidates) {
      const json got = cl::lookup_tuning(cl::DeviceInfo{}, {{k.name, v}}).to_json();
      EXPECT_EQ(got[k.name], v) << v.dump();
    }
    try {
      (void)cl::lookup_tuning(cl::DeviceInfo{}, {{k.name, json::object({{"wrong", "kind"}})}});
      ADD_FAILURE() << "an object was accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + k.name + "'"), std::string::npos) << e.what();
    }
  }
}

// docs/design.md's table of keys is `infinipot tune --keys`'s output.
TEST(Tune, KeysTableIsTheDocsTable) {
  const auto r = test::run_infinipot({"tune", "--keys"});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  std::ifstream in(std::string(INFINIPOT_TEST_SOURCE_DIR) + "/docs/design.md");
  const std::string docs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream lines(r.out);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_NE(docs.find(line), std::string::npos) << "docs/design.md lacks: " << line;
    ++rows;
  }
  EXPECT_EQ(rows, static_cast<int>(cl::tuning_keys().size()) + 2);
}

TEST(Tune, WritesWinnersThatTheDeviceThenUses) {
  test::TempDir dir;
  const std::string model = test::tiny_model(dir, 1024), platforms = dir.file("tuning.json");
  std::ofstream(platforms) << committed_tuning().dump(2);
  const auto r = test::run_infinipot({"tune", "-m", model, "--prefill", "64", "--decode", "4", "-r", "1", "--clblast",
                                      "2", "--write", platforms, "--json"},
                                     {{}, 900});
  ASSERT_TRUE(test::succeeded(r)) << r.describe();
  const json out = json::parse(r.out);
  for (const char* k : key_names()) EXPECT_TRUE(out["winners"].contains(k)) << k;
  // Every key's candidates were tried (the current value is skipped), and both CLBlast configurations.
  int clblast = 0, keys = 0;
  for (const auto& t : out["tried"]) (t["key"] == "clblast.Xgemm" ? clblast : keys)++;
  EXPECT_EQ(clblast, 2);
  EXPECT_GE(keys, 2 + 3 + 4 + 3 + 3 + 7 + 7 - 7 - 1);
  EXPECT_GT(out["before"]["prefill_s"].get<double>(), 0);
  EXPECT_GT(out["after"]["decode_s"].get<double>(), 0);

  // The file now has this device's entry, and a run reading that file matches it.
  const json written = json::parse(std::ifstream(platforms));
  const std::string vendor = out["entry"]["vendor"];
  ASSERT_TRUE(written["vendors"][vendor]["devices"].is_object());
  ASSERT_EQ(written["vendors"][vendor]["devices"].size(), 1u);
  const auto entry = written["vendors"][vendor]["devices"].begin();
  for (const char* k : key_names()) EXPECT_EQ(entry.value()[k], out["winners"][k]) << k;
  EXPECT_NE(entry.value()["_measured"].get<std::string>().find("infinipot tune"), std::string::npos);
  const auto d = test::run_infinipot({"devices", "--json"}, {{{"INFINIPOT_PLATFORMS_FILE", platforms}}, 60});
  ASSERT_TRUE(test::succeeded(d)) << d.describe();
  EXPECT_NE(d.out.find("\"device\": \"" + entry.key() + "\""), std::string::npos) << d.out;
}

}  // namespace
}  // namespace infinipot
