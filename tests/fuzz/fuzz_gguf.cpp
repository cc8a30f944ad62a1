// libFuzzer target: arbitrary bytes through the GGUF parser, the llama config and weight
// mapping, and inspect. A GgufError (or another std::exception from a rejected model) is the
// expected outcome for bad input; crashes, sanitizer reports, leaks and timeouts are bugs.
// When a file parses, the first and last row of every tensor with a reference dequantizer is
// dequantized, so ASan catches any tensor the parser wrongly accepted as inside the buffer.
// Seeds: tests/fuzz/corpus/gguf/ (written by test_fuzz_seeds, see tests/support/fuzz_seeds.h).
#include <cstdint>
#include <exception>
#include <vector>

#include "model_loader/gguf.h"
#include "model_loader/inspect.h"
#include "model_loader/model_config.h"
#include "model_loader/quant.h"

namespace {

using infinipot::gguf::GgufFile;
using infinipot::gguf::TensorInfo;

void touch_rows(const GgufFile& f, const TensorInfo& t) {
  const auto& tr = infinipot::quant::traits(t.type);
  if (!tr.supported) return;
  const int64_t row = t.shape[0];
  if (row > (int64_t{1} << 20)) return;  // keep each input fast; bounds are checked regardless
  const size_t row_bytes = infinipot::quant::row_bytes(t.type, row);
  std::vector<float> out(static_cast<size_t>(row));
  const uint8_t* data = f.tensor_data(t);
  infinipot::quant::dequantize_row(t.type, data, out.data(), row);
  infinipot::quant::dequantize_row(t.type, data + (t.n_bytes - row_bytes), out.data(), row);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    GgufFile f = GgufFile::from_memory(data, size, "fuzz.gguf");
    (void)infinipot::inspect_json(f).dump();  // dump: the JSON must always be valid UTF-8
    (void)infinipot::inspect_text(f);
    for (const TensorInfo& t : f.tensors()) touch_rows(f, t);
    const infinipot::LlamaConfig cfg = infinipot::read_llama_config(f);
    (void)infinipot::map_weights(f, cfg);
  } catch (const infinipot::gguf::GgufError&) {
  } catch (const std::exception&) {
    // The loader's contract is GgufError for every bad input; anything else escaping (a
    // json or bad_alloc error, say) is a bug, so make the fuzzer report it.
    __builtin_trap();
  }
  return 0;
}
