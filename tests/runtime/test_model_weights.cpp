// The weights on a device that shares the host's memory (PoCL here): read from the file
// straight into mapped buffers, the file's pages then dropped from the page cache, and the
// bytes on the device the same as the copied path's, matrix for matrix (exact: both paths
// read the same file bytes and apply the same row order and device layout).
#include <fcntl.h>
#include <unistd.h>

#include <stdexcept>

#include <gtest/gtest.h>

#include "model_loader/model_config.h"
#include "runtime/model_weights.h"
#include "tests/runtime/kernel_fixture.h"
#include "tests/support/gguf_test_util.h"

namespace infinipot {
namespace {

using testing_support::shared_context;

std::vector<uint8_t> bytes_of(cl::Context& ctx, const ops::DeviceWeight& w) {
  std::vector<uint8_t> out(w.buf.bytes());
  ctx.read(w.buf, out.data(), out.size());
  return out;
}

std::vector<float> floats_of(cl::Context& ctx, const cl::Buffer& b) {
  std::vector<float> out(b.bytes() / sizeof(float));
  ctx.read(b, out.data(), b.bytes());
  return out;
}

// Every page of the file into the page cache, as after a download or a first run.
void read_whole_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::vector<char> buf(1 << 20);
  while (::read(fd, buf.data(), buf.size()) > 0) {
  }
  ::close(fd);
}

// A private copy of the model, written through to disk: the page cache is shared by every
// process, and tests running beside this one read the real model file (their reads would put
// its pages back). In the working directory (the build tree, a disk), not TMPDIR, which may be
// a tmpfs whose pages are the file itself and cannot be dropped.
struct PrivateCopy {
  explicit PrivateCopy(const std::string& from) : path("model_weights_test_copy.gguf") {
    const std::vector<uint8_t> bytes = test::read_file(from);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) throw std::runtime_error("cannot write " + path + " in the working directory");
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::fsync(fd);  // clean pages: dirty ones are not dropped
    ::close(fd);
    if (done != bytes.size()) throw std::runtime_error("short write of " + path);
  }
  ~PrivateCopy() { ::unlink(path.c_str()); }
  std::string path;
};

TEST(ModelWeights, InPlaceOnUnifiedMemoryEqualsTheCopyAndDropsTheFilesPages) {
  const std::string real = test::real_model_path();
  ASSERT_FALSE(real.empty());
  const PrivateCopy copy(real);
  const std::string& path = copy.path;
  cl::Context& ctx = shared_context();
  ASSERT_TRUE(ctx.device().host_unified) << "PoCL's CPU device reports host-unified memory";
  EXPECT_EQ(default_weight_place(ctx), WeightPlace::InPlace);
  const gguf::GgufFile file = gguf::GgufFile::open(path);
  const LlamaConfig cfg = read_llama_config(file);
  const WeightTable table = map_weights(file, cfg);

  read_whole_file(path);
  const uint64_t cached_before = file.cached_bytes();
  ASSERT_GT(cached_before, file.file_size() / 2) << "the file was just read whole";
  const DeviceModel in_place = upload_model(ctx, file, cfg, table, WeightPlace::InPlace);
  const uint64_t cached_after = file.cached_bytes();
  EXPECT_EQ(in_place.place, WeightPlace::InPlace);
  // What may stay: the metadata pages the parse touched through the mapping (the vocabulary).
  EXPECT_LT(cached_after, file.data_offset() + (4u << 20))
      << cached_before << " bytes were cached before the upload, " << cached_after << " after";

  const DeviceModel copied = upload_model(ctx, file, cfg, table, WeightPlace::Copied);
  EXPECT_EQ(copied.place, WeightPlace::Copied);
  ASSERT_EQ(in_place.layers.size(), copied.layers.size());
  EXPECT_EQ(bytes_of(ctx, in_place.token_embd), bytes_of(ctx, copied.token_embd));
  EXPECT_EQ(floats_of(ctx, in_place.output_norm), floats_of(ctx, copied.output_norm));
  for (size_t i = 0; i < in_place.layers.size(); ++i) {
    const DeviceLayer& a = in_place.layers[i];
    const DeviceLayer& b = copied.layers[i];
    ASSERT_EQ(a.qkv_fused(), b.qkv_fused());
    ASSERT_EQ(a.gate_up_fused(), b.gate_up_fused());
    for (auto m : {&DeviceLayer::wqkv, &DeviceLayer::wq, &DeviceLayer::wk, &DeviceLayer::wv, &DeviceLayer::wo,
                   &DeviceLayer::w_gate_up, &DeviceLayer::w_gate, &DeviceLayer::w_up, &DeviceLayer::w_down}) {
      ASSERT_EQ(static_cast<bool>((a.*m).buf), static_cast<bool>((b.*m).buf)) << "layer " << i;
      if ((a.*m).buf) EXPECT_EQ(bytes_of(ctx, a.*m), bytes_of(ctx, b.*m)) << "layer " << i;
    }
  }
}

// A file truncated after it was opened: the in-place path reads with checked reads too, so the
// upload is an error naming the file, not SIGBUS (the mapping is never read for weights).
TEST(ModelWeights, ATruncatedFileIsAnErrorInPlaceToo) {
  const std::string path = test::real_model_path();
  ASSERT_FALSE(path.empty());
  test::TempDir dir;
  const std::string copy = dir.path() + "/model.gguf";
  test::write_file(copy, test::read_file(path));
  const gguf::GgufFile file = gguf::GgufFile::open(copy);
  const LlamaConfig cfg = read_llama_config(file);
  const WeightTable table = map_weights(file, cfg);
  ASSERT_EQ(::truncate(copy.c_str(), static_cast<off_t>(file.data_offset() + 4096)), 0);
  try {
    upload_model(shared_context(), file, cfg, table, WeightPlace::InPlace);
    FAIL() << "a truncated file uploaded";
  } catch (const gguf::GgufError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace infinipot
