// libFuzzer target: arbitrary bytes through the pot snapshot parser (pot/pot_snapshot.h). A
// std::invalid_argument is the expected outcome for bad input; crashes, sanitizer reports,
// leaks and timeouts are bugs. What parses must serialize to bytes that parse to the same
// serialization (the header's JSON text may be spelled differently from the input's).
// Seeds: tests/fuzz/corpus/pot_snapshot/ (seed*: written by test_pot_snapshot, with and
// without a sliding-window store; v1_seed*: format version 1 files, kept as written).
#include <cstdint>
#include <cstdlib>
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "pot/pot_snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const infinipot::PotSnapshot s = infinipot::parse_pot_snapshot(data, size, "fuzz");
    const std::vector<uint8_t> again = infinipot::serialize_pot_snapshot(s);
    const infinipot::PotSnapshot t = infinipot::parse_pot_snapshot(again.data(), again.size(), "fuzz (re-serialized)");
    if (infinipot::serialize_pot_snapshot(t) != again) std::abort();
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
