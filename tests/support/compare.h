// Element-wise comparison of a kernel's output with its CPU reference under a per-element
// tolerance. On failure the message names the worst element (index, got, want, tolerance) and
// how many elements are out. With INFINIPOT_REPORT_ERRORS=1 every comparison prints its worst
// error as a fraction of the tolerance (how much headroom each stated tolerance has).
#pragma once
#include <functional>
#include <string>
#include <vector>
#include <gtest/gtest.h>

namespace infinipot::testing_support {

// tol(i): the largest |got[i] - want[i]| accepted for element i.
::testing::AssertionResult all_close(const std::string& what, const std::vector<float>& got,
                                     const std::vector<float>& want, const std::function<double(size_t)>& tol);
// The same tolerance for every element; 0 demands bit-equal values.
::testing::AssertionResult all_close(const std::string& what, const std::vector<float>& got,
                                     const std::vector<float>& want, double tol);

}  // namespace infinipot::testing_support
