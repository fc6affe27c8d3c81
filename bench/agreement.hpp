// How far one contender's output lies from another's. A NaN on either side is infinitely far: std::max drops a NaN,
// and an output of NaNs would otherwise agree with anything.
#pragma once

#include <vector>

namespace tessera::bench {

// The largest |a[i] − b[i]| (infinite where either is NaN); the vectors have one size.
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);
// max_abs_diff(got, want) over the largest |want[i]| (at least 1e-30).
double max_rel_diff(const std::vector<float>& got, const std::vector<float>& want);

}  // namespace tessera::bench
