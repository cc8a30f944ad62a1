#include "tests/support/compare.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace infinipot::testing_support {

::testing::AssertionResult all_close(const std::string& what, const std::vector<float>& got,
                                     const std::vector<float>& want, const std::function<double(size_t)>& tol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": " << got.size() << " values, expected " << want.size();
  size_t n_bad = 0, worst = 0;
  double worst_ratio = -1;  // |err| / tol; infinite for NaN or for any error at tolerance 0
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(want[i]));
    const double t = tol(i);
    if (!(err <= t)) ++n_bad;  // also catches NaN
    const double ratio = std::isnan(err) ? INFINITY : t > 0 ? err / t : (err > 0 ? INFINITY : 0.0);
    if (ratio > worst_ratio) worst = i, worst_ratio = ratio;
  }
  if (const char* env = std::getenv("INFINIPOT_REPORT_ERRORS"); env && *env == '1')
    std::printf("  [errors] %-44s worst |err|/tol = %.3g over %zu values\n", what.c_str(), worst_ratio, got.size());
  if (n_bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream msg;
  msg.precision(9);
  msg << what << ": " << n_bad << " of " << got.size() << " values out of tolerance; worst at index " << worst
      << ": got " << got[worst] << ", want " << want[worst] << ", |err| "
      << std::fabs(double(got[worst]) - double(want[worst])) << " > tol " << tol(worst);
  return ::testing::AssertionFailure() << msg.str();
}

::testing::AssertionResult all_close(const std::string& what, const std::vector<float>& got,
                                     const std::vector<float>& want, double tol) {
  return all_close(what, got, want, [tol](size_t) { return tol; });
}

}  // namespace infinipot::testing_support
