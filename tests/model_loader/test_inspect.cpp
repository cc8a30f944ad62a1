// inspect_json / inspect_text: structure, long-array summaries, invalid UTF-8 that must
// still dump, the real models' summaries, and the verdict on whether this runtime can run the
// file (every model-level fault of test_model_config.cpp is also checked there through
// inspect; the tokenizer and chat-template refusals are checked here).
#include <gtest/gtest.h>

#include <functional>

#include "model_loader/gguf.h"
#include "tests/kit/gguf_writer.h"
#include "model_loader/inspect.h"
#include "model_loader/runnable.h"
#include "tests/kit/tiny_model.h"
#include "tests/support/cli_process.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

using gguf::GgufFile;
using nlohmann::json;

TEST(Inspect, JsonHasMetadataAndTensors) {
  const std::vector<uint8_t> bytes = tiny_llama_bytes({});
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "tiny.gguf");
  const json j = inspect_json(f);
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["metadata"]["general.architecture"], "llama");
  EXPECT_EQ(j["metadata"]["llama.block_count"], 2);
  EXPECT_EQ(j["metadata"]["llama.attention.layer_norm_rms_epsilon"].get<double>(), 1e-05);  // not 9.99999974e-06
  const json& tokens = j["metadata"]["tokenizer.ggml.tokens"];
  EXPECT_EQ(tokens["type"], "array");
  EXPECT_EQ(tokens["elem_type"], "string");
  EXPECT_EQ(tokens["length"], f.get_string_array("tokenizer.ggml.tokens").size());
  ASSERT_EQ(tokens["head"].size(), 8u);
  EXPECT_EQ(tokens["head"][1], "<|im_start|>");
  EXPECT_EQ(j["metadata"]["tokenizer.ggml.token_type"]["elem_type"], "int32");

  ASSERT_EQ(j["tensors"].size(), f.tensors().size());
  const json& t0 = j["tensors"][0];
  EXPECT_EQ(t0["name"], "token_embd.weight");
  EXPECT_EQ(t0["type"], "F32");
  EXPECT_EQ(t0["shape"], json::array({64, f.tensors()[0].shape[1]}));
  EXPECT_EQ(t0["offset"], 0);
  EXPECT_NO_THROW(j.dump());
}

TEST(Inspect, ShortArraysAreListedInFullAndInvalidUtf8StillDumps) {
  gguf::GgufWriter w;
  w.set_i32_array("short", std::vector<int32_t>(16, 7));
  w.set_i32_array("long", std::vector<int32_t>(17, 7));
  w.set_string("bad\xff" "key", std::string("caf\xc3") + "\xa9 \xff\xfe \xed\xa0\x80 ok");
  w.set_f32("nan", std::nanf(""));
  const std::vector<uint8_t> bytes = w.to_bytes();
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());
  const json j = inspect_json(f);
  EXPECT_TRUE(j["metadata"]["short"].is_array());
  EXPECT_EQ(j["metadata"]["short"].size(), 16u);
  EXPECT_EQ(j["metadata"]["long"]["length"], 17);
  std::string dumped;
  ASSERT_NO_THROW(dumped = j.dump());
  EXPECT_NE(dumped.find("café"), std::string::npos);
  EXPECT_NE(dumped.find("\xef\xbf\xbd"), std::string::npos);  // U+FFFD replacement
  EXPECT_NO_THROW(inspect_text(f));
}

TEST(Inspect, TextSummary) {
  const std::vector<uint8_t> bytes = tiny_llama_bytes({});
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "tiny.gguf");
  const std::string text = inspect_text(f);
  EXPECT_NE(text.find("tiny.gguf: GGUF v3"), std::string::npos) << text;
  EXPECT_NE(text.find("general.architecture"), std::string::npos);
  EXPECT_NE(text.find("\"llama\""), std::string::npos);
  EXPECT_NE(text.find("[STRING x"), std::string::npos);
  EXPECT_NE(text.find("tensors by type"), std::string::npos);
  EXPECT_NE(text.find("total tensor data"), std::string::npos);
  EXPECT_NE(text.find("tokenizer.chat_template"), std::string::npos);
  EXPECT_NE(text.find("bytes)"), std::string::npos);  // the long template is cut
}

TEST(Inspect, TinyModelIsRunnable) {
  const std::vector<uint8_t> bytes = tiny_llama_bytes({});
  GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "tiny.gguf");
  const json j = inspect_json(f);
  EXPECT_EQ(j["runnable"], true);
  EXPECT_TRUE(j["cannot_run"].is_null());
  const std::string text = inspect_text(f);
  EXPECT_NE(text.find("\nrunnable: yes"), std::string::npos) << text;
  EXPECT_EQ(text.find("cannot run"), std::string::npos) << text;
}

// A sound container whose tokenizer or chat template `run` refuses: inspect still lists it
// and says why it cannot run.
TEST(Inspect, TokenizerAndTemplateRefusalsAreReported) {
  struct Case {
    const char* what;
    std::function<void(gguf::GgufWriter&)> change;
    const char* reason;
  };
  const Case cases[] = {
      {"tokenizer model", [](gguf::GgufWriter& w) { w.replace("tokenizer.ggml.model", gguf::value_string("bert")); },
       "unsupported tokenizer model tokenizer.ggml.model = \"bert\""},
      {"no tokenizer", [](gguf::GgufWriter& w) { w.erase("tokenizer.ggml.model"); }, "missing tokenizer.ggml.model"},
      {"no merges", [](gguf::GgufWriter& w) { w.erase("tokenizer.ggml.merges"); }, "missing tokenizer.ggml.merges"},
      {"pre-tokenizer", [](gguf::GgufWriter& w) { w.replace("tokenizer.ggml.pre", gguf::value_string("klingon")); },
       "klingon"},
      {"chat template", [](gguf::GgufWriter& w) {
         w.replace("tokenizer.chat_template", gguf::value_string("{{ bos_token }}[INST] {{ m }} [/INST]"));
       }, "template"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    gguf::GgufWriter w = tiny_llama_writer({});
    c.change(w);
    const std::vector<uint8_t> bytes = w.to_bytes();
    GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size(), "tiny.gguf");
    const json j = inspect_json(f);
    EXPECT_EQ(j["runnable"], false);
    ASSERT_TRUE(j["cannot_run"].is_string());
    EXPECT_NE(j["cannot_run"].get<std::string>().find(c.reason), std::string::npos) << j["cannot_run"];
    const std::string text = inspect_text(f);
    EXPECT_NE(text.find("\ncannot run: " + j["cannot_run"].get<std::string>() + "\n"), std::string::npos) << text;
  }
}

TEST(Inspect, RealModel) {
  const std::string path = test::real_model_path();
  ASSERT_FALSE(path.empty());
  GgufFile f = GgufFile::open(path);
  const std::string text = inspect_text(f);
  EXPECT_NE(text.find("272 tensors"), std::string::npos) << text;
  EXPECT_NE(text.find("Q4_1        210 tensors"), std::string::npos) << text;
  const json j = inspect_json(f);
  EXPECT_EQ(j["metadata"]["llama.rope.freq_base"], 100000.0);
  EXPECT_EQ(j["metadata"]["tokenizer.ggml.merges"]["length"], 48900);
  EXPECT_NO_THROW(j.dump());
  EXPECT_EQ(j["runnable"], true);
  EXPECT_NE(text.find("\nrunnable: yes"), std::string::npos) << text;
}

// Gemma 3 runs: architecture, Q4_K/Q5_0 device kernels, SentencePiece tokenizer and no chat
// template (completion mode) are all accepted.
TEST(Inspect, GemmaModelIsRunnable) {
  const std::string path = test::gemma_model_path();
  ASSERT_FALSE(path.empty());
  GgufFile f = GgufFile::open(path);
  const json j = inspect_json(f);
  EXPECT_EQ(j["metadata"]["general.architecture"], "gemma3");
  EXPECT_EQ(j["runnable"], true) << j["cannot_run"];
  const std::string text = inspect_text(f);
  EXPECT_NE(text.find("\nrunnable: yes"), std::string::npos) << text;
}

// `inspect` and `run` on the same refused model: inspect lists it (exit 0) and names the reason
// that `run` then fails with (exit 1), before any device work.
TEST(Inspect, CommandGivesTheReasonRunFailsWith) {
  const std::function<void(gguf::GgufWriter&)> faults[] = {
      [](gguf::GgufWriter& w) { w.replace("general.architecture", gguf::value_string("qwen2")); },
      [](gguf::GgufWriter& w) { w.erase_tensor("blk.1.ffn_up.weight"); },
      [](gguf::GgufWriter& w) { w.replace("llama.attention.head_count", gguf::value_u32(3)); },
      [](gguf::GgufWriter& w) { w.replace("tokenizer.ggml.model", gguf::value_string("bert")); },
  };
  test::TempDir dir;
  int i = 0;
  for (const auto& fault : faults) {
    gguf::GgufWriter w = tiny_llama_writer({});
    fault(w);
    const std::vector<uint8_t> bytes = w.to_bytes();
    const std::string path = dir.file("fault" + std::to_string(i++) + ".gguf");
    test::write_file(path, bytes);
    const Runnability verdict = check_runnable(GgufFile::open(path));
    SCOPED_TRACE(verdict.reason);
    ASSERT_FALSE(verdict.runnable);
    test::ProcResult r = test::run_infinipot({"inspect", "-m", path});
    ASSERT_TRUE(test::succeeded(r));
    EXPECT_NE(r.out.find("\ncannot run: " + verdict.reason + "\n"), std::string::npos) << r.out;
    r = test::run_infinipot({"run", "-m", path, "-p", "hi", "-n", "1"});
    EXPECT_TRUE(test::fails_cleanly(r, {verdict.reason}, 1));
  }
}

// The command: a sound container lists with exit 0 whether or not it can run.
TEST(Inspect, CommandExitsZeroAndSaysWhetherItCanRun) {
  const std::string smol = test::real_model_path(), gemma = test::gemma_model_path();
  ASSERT_FALSE(smol.empty());
  ASSERT_FALSE(gemma.empty());
  test::ProcResult r = test::run_infinipot({"inspect", "-m", smol});
  ASSERT_TRUE(test::succeeded(r));
  EXPECT_NE(r.out.find("\nrunnable: yes"), std::string::npos) << r.out;
  r = test::run_infinipot({"inspect", "-m", gemma});
  ASSERT_TRUE(test::succeeded(r));
  EXPECT_NE(r.out.find("\nrunnable: yes"), std::string::npos) << r.out;
  r = test::run_infinipot({"inspect", "-m", gemma, "--json"});
  ASSERT_TRUE(test::succeeded(r));
  const json j = json::parse(r.out);
  EXPECT_EQ(j["runnable"], true);
}

}  // namespace
}  // namespace infinipot
