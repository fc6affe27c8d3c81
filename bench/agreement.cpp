#include "bench/agreement.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace tessera::bench {

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i]));
    if (std::isnan(d)) return HUGE_VAL;
    diff = std::max(diff, d);
  }
  return diff;
}

double max_rel_diff(const std::vector<float>& got, const std::vector<float>& want) {
  double magnitude = 1e-30;
  for (float x : want) magnitude = std::max(magnitude, static_cast<double>(std::fabs(x)));
  return max_abs_diff(got, want) / magnitude;
}

}  // namespace tessera::bench
