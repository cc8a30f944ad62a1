// Hostile command lines and inputs through the real `infinipot` binary (issue #3): each must
// end by itself, quickly, with a non-zero exit and a message naming the problem: never a
// signal, a hang or a silent success. Exit codes: 1 for errors, CLI11's own (1xx) for usage
// errors caught while parsing flags.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/cli_process.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

using test::fails_cleanly;
using test::run_infinipot;
using test::TempDir;

constexpr double kQuick = 30;  // seconds: user errors are found before any device work

void write_text(const std::string& path, const std::string& text) {
  test::write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
}

class CliArgs : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = test::real_model_path();
    ASSERT_FALSE(model_.empty());
  }
  // `run -m MODEL` followed by `args`.
  test::ProcResult run(const std::vector<std::string>& args) {
    std::vector<std::string> all = {"run", "-m", model_};
    all.insert(all.end(), args.begin(), args.end());
    return run_infinipot(all);
  }
  std::string model_;
  TempDir dir_;
};

// The harness itself: a crash, a hang, a success or a missing needle must not pass.
TEST(CliHarness, DetectsSignalsHangsSuccessAndMissingText) {
  auto segv = test::run_process({"/bin/sh", "-c", "echo oops >&2; kill -SEGV $$"});
  EXPECT_EQ(segv.signal, SIGSEGV) << segv.describe();
  EXPECT_FALSE(fails_cleanly(segv, {"oops"}));
  auto hang = test::run_process({"/bin/sh", "-c", "sleep 30"}, {{}, 0.5});
  EXPECT_TRUE(hang.timed_out);
  EXPECT_LT(hang.seconds, 10);
  EXPECT_FALSE(fails_cleanly(hang, {}));
  EXPECT_FALSE(fails_cleanly(test::run_process({"/bin/true"}), {}));
  auto err = test::run_process({"/bin/sh", "-c", "echo \"$X\" >&2; exit 4"}, {{{"X", "error: bad thing"}}, 30});
  EXPECT_TRUE(fails_cleanly(err, {"error: bad thing"}, 4));
  EXPECT_FALSE(fails_cleanly(err, {"error: bad thing"}, 1));
  EXPECT_FALSE(fails_cleanly(err, {"something else"}));
  auto asan = test::run_process({"/bin/sh", "-c", "echo '==1==ERROR: LeakSanitizer: detected memory leaks' >&2; exit 1"});
  EXPECT_FALSE(fails_cleanly(asan, {}));
  EXPECT_EQ(test::device_mem_in("Minimum that works: --device-mem 128M; or"), "128M");
}

TEST_F(CliArgs, UnknownFlagIsNamed) {
  // Usage errors exit 2 (README).
  EXPECT_TRUE(fails_cleanly(run({"-p", "hi", "--bogus-flag"}), {"--bogus-flag"}, 2, kQuick));
  EXPECT_TRUE(fails_cleanly(run_infinipot({"inspect", "-m", model_, "--jsn"}), {"--jsn"}, 2, kQuick));
}

TEST_F(CliArgs, UnknownSubcommandIsNamed) {
  EXPECT_TRUE(fails_cleanly(run_infinipot({"bogus"}), {"unknown subcommand 'bogus'", "run"}, 2, kQuick));
  EXPECT_TRUE(fails_cleanly(run_infinipot({}), {"subcommand"}, 2, kQuick));
}

TEST_F(CliArgs, MalformedDeviceMemSizesAreRefusedNamingTheText) {
  for (const std::string size : {"12Q", "0", "-5M", "1.5.5G", "M", "99999999999999999999G"}) {
    SCOPED_TRACE(size);
    EXPECT_TRUE(fails_cleanly(run({"-p", "hi", "--device-mem", size}), {"--device-mem", "'" + size + "'", "256M"},
                              std::nullopt, kQuick));
  }
  // perplexity shares the validator.
  EXPECT_TRUE(fails_cleanly(run_infinipot({"perplexity", "-m", model_, "-f", "x.txt", "--device-mem", "12Q"}),
                            {"--device-mem", "'12Q'"}, std::nullopt, kQuick));
}

TEST_F(CliArgs, MissingModelFileIsNamed) {
  const std::string missing = dir_.file("no-such-model.gguf");
  EXPECT_TRUE(fails_cleanly(run_infinipot({"run", "-m", missing, "-p", "hi"}), {missing, "cannot open"}, 1, kQuick));
  EXPECT_TRUE(fails_cleanly(run_infinipot({"inspect", "-m", missing}), {missing, "cannot open"}, 1, kQuick));
  EXPECT_TRUE(fails_cleanly(run_infinipot({"tokenize", "-m", missing, "-p", "hi"}), {missing}, 1, kQuick));
}

TEST_F(CliArgs, ModelPathThatIsADirectory) {
  EXPECT_TRUE(fails_cleanly(run_infinipot({"run", "-m", dir_.path(), "-p", "hi"}), {dir_.path(), "is a directory"}, 1,
                            kQuick));
  EXPECT_TRUE(fails_cleanly(run_infinipot({"inspect", "-m", dir_.path()}), {"is a directory"}, 1, kQuick));
}

TEST_F(CliArgs, MissingOrDirectoryInputFile) {
  const std::string missing = dir_.file("no-such-doc.txt");
  EXPECT_TRUE(fails_cleanly(run({"-f", missing}), {missing, "does not exist"}, 1, kQuick));
  EXPECT_TRUE(fails_cleanly(run({"-f", dir_.path()}), {dir_.path(), "is a directory"}, 1, kQuick));
  EXPECT_TRUE(fails_cleanly(run_infinipot({"perplexity", "-m", model_, "-f", missing}), {missing, "does not exist"}, 1,
                            kQuick));
  EXPECT_TRUE(fails_cleanly(run_infinipot({"tokenize", "-m", model_, "-f", missing}), {missing, "does not exist"}, 1,
                            kQuick));
}

TEST_F(CliArgs, EmptyPromptAndWhitespaceOnlyDocument) {
  EXPECT_TRUE(fails_cleanly(run({"-p", ""}), {"prompt is empty"}, 1, kQuick));
  EXPECT_TRUE(fails_cleanly(run({"-p", " \t\n "}), {"prompt is empty"}, 1, kQuick));
  const std::string blank = dir_.file("blank.txt"), empty = dir_.file("empty.txt");
  write_text(blank, "  \n\t\r\n  ");
  write_text(empty, "");
  EXPECT_TRUE(fails_cleanly(run({"-f", blank}), {blank, "is empty"}, 1, kQuick));
  EXPECT_TRUE(fails_cleanly(run({"-f", empty}), {empty, "is empty"}, 1, kQuick));
}

TEST_F(CliArgs, InvalidUtf8NamesTheByteOffset) {
  EXPECT_TRUE(fails_cleanly(run({"-p", "ab\xff" "cd"}), {"prompt", "not valid UTF-8", "offset 2"}, 1, kQuick));
  // An overlong encoding of '/', and a lone surrogate, are invalid too.
  EXPECT_TRUE(fails_cleanly(run({"-p", "x\xc0\xaf"}), {"not valid UTF-8", "offset 1"}, 1, kQuick));
  EXPECT_TRUE(fails_cleanly(run({"-p", "okay \xed\xa0\x80"}), {"not valid UTF-8", "offset 5"}, 1, kQuick));
  EXPECT_TRUE(fails_cleanly(run({"-p", "hi", "-q", "what\xc3"}), {"question", "not valid UTF-8", "offset 4"}, 1,
                            kQuick));

  const std::string doc = dir_.file("latin1.txt");
  write_text(doc, std::string("The caf\xe9 is open.\n"));  // Latin-1 e-acute at byte 7
  EXPECT_TRUE(fails_cleanly(run({"-f", doc}), {doc, "not valid UTF-8", "offset 7", "iconv"}, 1, kQuick));
  EXPECT_TRUE(fails_cleanly(run_infinipot({"perplexity", "-m", model_, "-f", doc}), {"not valid UTF-8", "offset 7"}, 1,
                            kQuick));
}

TEST_F(CliArgs, NPredictBelowOneIsAnError) {
  EXPECT_TRUE(fails_cleanly(run({"-p", "hi", "-n", "0"}), {"-n must be at least 1", "got 0"}, 1, kQuick));
  EXPECT_TRUE(fails_cleanly(run({"-p", "hi", "-n", "-3"}), {"-n must be at least 1", "got -3"}, 1, kQuick));
  EXPECT_TRUE(fails_cleanly(run({"-p", "hi", "-n", "lots"}), {"lots"}, std::nullopt, kQuick));
}

TEST_F(CliArgs, PromptAndFileBothOrNeither) {
  const std::string doc = dir_.file("doc.txt");
  write_text(doc, "A short document.\n");
  EXPECT_TRUE(fails_cleanly(run({"-p", "hi", "-f", doc}), {"--prompt", "--file"}, std::nullopt, kQuick));
  EXPECT_TRUE(fails_cleanly(run({}), {"exactly one of -p PROMPT or -f FILE"}, 1, kQuick));
  EXPECT_TRUE(fails_cleanly(run_infinipot({"tokenize", "-m", model_}), {"-p TEXT or -f FILE"}, 1, kQuick));
  EXPECT_TRUE(fails_cleanly(run_infinipot({"tokenize", "-m", model_, "-p", "a", "-f", doc}), {"--prompt", "--file"},
                            std::nullopt, kQuick));
}

TEST_F(CliArgs, SamplingParametersOutOfRange) {
  // Usage errors (exit 2), refused before the model is loaded.
  EXPECT_TRUE(fails_cleanly(run({"-p", "hi", "--top-p", "0"}), {"--top-p", "(0, 1]", "got 0"}, 2, kQuick));
  EXPECT_TRUE(fails_cleanly(run({"-p", "hi", "--top-p", "1.5"}), {"--top-p"}, std::nullopt, kQuick));
  EXPECT_TRUE(fails_cleanly(run({"-p", "hi", "--temp", "-1"}), {"--temp"}, std::nullopt, kQuick));
  EXPECT_TRUE(fails_cleanly(run({"-p", "hi", "--temp", "nan"}), {"--temp", "finite", "got nan"}, 2, kQuick));
  EXPECT_TRUE(fails_cleanly(run({"-p", "hi", "--top-k", "-1"}), {"--top-k"}, std::nullopt, kQuick));
  EXPECT_TRUE(fails_cleanly(run({"-p", "hi", "--seed", "-1"}), {"--seed", ">= 0", "-1"}, std::nullopt, kQuick));
}

TEST_F(CliArgs, ContextSmallerThanThePrompt) {
  auto r = run({"-p", "Tell me a long story about a dragon and a knight.", "-n", "4", "--ctx", "8"});
  EXPECT_TRUE(fails_cleanly(r, {"--ctx is 8", "prompt (", "raise --ctx or shorten the input"}, 1, kQuick));
  EXPECT_TRUE(fails_cleanly(run({"-p", "hi", "--ctx", "0"}), {"--ctx"}, std::nullopt, kQuick));
}

TEST_F(CliArgs, PerplexityTextShorterThanOneWindow) {
  const std::string text = dir_.file("short.txt");
  write_text(text, "In the beginning was a short text.\n");
  auto r = run_infinipot({"perplexity", "-m", model_, "-f", text, "-c", "128"});
  EXPECT_TRUE(fails_cleanly(r, {"fewer than one window of --ctx 128", "smaller --ctx"}, 1, kQuick));
  // -c below the smallest window the scorer supports is a usage error naming -c's range.
  EXPECT_TRUE(fails_cleanly(run_infinipot({"perplexity", "-m", model_, "-f", text, "-c", "8"}), {"--ctx", "8", "16"},
                            std::nullopt, kQuick));
  const std::string empty = dir_.file("empty.txt");
  write_text(empty, "");
  EXPECT_TRUE(fails_cleanly(run_infinipot({"perplexity", "-m", model_, "-f", empty, "-c", "16"}), {"0 tokens"}, 1,
                            kQuick));
}

// ---- Malformed GGUF files through `infinipot inspect` (and `run`) ------------------------

class CliMalformedGguf : public ::testing::Test {
 protected:
  // Writes `bytes` to a file and checks that inspect and run both refuse it with exit 1
  // and a message naming the file and every needle.
  void expect_refused(const std::string& name, const std::vector<uint8_t>& bytes,
                      std::initializer_list<std::string_view> needles) {
    SCOPED_TRACE(name);
    const std::string path = dir_.file(name);
    test::write_file(path, bytes);
    auto r = run_infinipot({"inspect", "-m", path});
    EXPECT_TRUE(fails_cleanly(r, {path}, 1, kQuick));
    EXPECT_TRUE(fails_cleanly(r, needles, 1, kQuick));
    EXPECT_TRUE(fails_cleanly(run_infinipot({"inspect", "--json", "-m", path}), needles, 1, kQuick));
    EXPECT_TRUE(fails_cleanly(run_infinipot({"run", "-m", path, "-p", "hi", "-n", "1"}), needles, 1, kQuick));
  }
  TempDir dir_;
};

TEST_F(CliMalformedGguf, BadMagic) {
  expect_refused("elf.gguf", test::RawGguf().raw("\x7f" "ELF").u32(3).zeros(32).bytes(), {"bad magic", "not a GGUF"});
  expect_refused("ggml.gguf", test::RawGguf().raw("GGML").u32(3).zeros(32).bytes(), {"bad magic \"GGML\""});
}

TEST_F(CliMalformedGguf, EmptyAndTruncated) {
  expect_refused("empty.gguf", {}, {"empty"});
  expect_refused("two_bytes.gguf", test::RawGguf().raw("GG").bytes(), {"truncated"});
  // The real model cut after its first 5000 bytes: the header promises 272 tensor infos.
  auto head = test::read_file(test::real_model_path());
  ASSERT_GT(head.size(), 5000u);
  head.resize(5000);
  expect_refused("real_head.gguf", head, {"tensor_count 272", "corrupt"});
  // A metadata string that runs past the end.
  expect_refused("short_string.gguf", test::RawGguf().header(3, 0, 1).str("general.name").u32(8).u64(100).raw("abc").bytes(),
                 {"general.name", "string length 100", "exceeds"});
}

TEST_F(CliMalformedGguf, HugeCounts) {
  expect_refused("huge_tensors.gguf", test::RawGguf().header(3, uint64_t{1} << 62, 0).zeros(64).bytes(),
                 {"tensor_count 4611686018427387904"});
  expect_refused("huge_kv.gguf", test::RawGguf().header(3, 0, UINT64_MAX).zeros(64).bytes(),
                 {"kv_count 18446744073709551615"});
  expect_refused("huge_array.gguf",
                 test::RawGguf().header(3, 0, 1).str("arr").u32(9).u32(4).u64(uint64_t{1} << 62).zeros(40).bytes(),
                 {"metadata 'arr'", "array of 4611686018427387904"});
  expect_refused("huge_string.gguf", test::RawGguf().header(3, 0, 1).u64(UINT64_MAX).zeros(32).bytes(),
                 {"string length 18446744073709551615"});
}

TEST_F(CliMalformedGguf, UnsupportedVersionAndTensorType) {
  expect_refused("v99.gguf", test::RawGguf().header(99, 0, 0).zeros(16).bytes(), {"unsupported GGUF version 99"});
  auto one_tensor = test::RawGguf().header(3, 1, 0).tensor_info("t", {32}, 99, 0).pad_to(32).zeros(128);
  expect_refused("type99.gguf", one_tensor.bytes(), {"tensor 't'", "unknown tensor type id 99"});
}

}  // namespace
}  // namespace infinipot
