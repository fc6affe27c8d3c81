// Integer rounding, the median, quantiles and the mean: the small arithmetic every part of tessera (tilings, plans,
// features, the tuner and the benchmarks) shares.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace tessera {

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
constexpr std::int64_t round_up(std::int64_t a, std::int64_t b) { return ceil_div(a, b) * b; }
constexpr std::int64_t round_down(std::int64_t a, std::int64_t b) { return a / b * b; }
// Tiles of `b` covering `a`, in the doubles that models and features are computed in.
inline double tiles_of(double a, double b) { return std::ceil(a / b); }

// The upper median (the element at size / 2 in order); 0 for no samples.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// The median with an even count's middle two averaged: for merging a few runs, where the upper one alone would
// favour the slower run.
inline double midpoint_median(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return v.size() % 2 ? *mid : (*std::max_element(v.begin(), mid) + *mid) / 2;
}

// The element at rank q·size in order (q in [0, 1]; 1: the largest); NaN for no samples. For regret summaries.
inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(
      std::min<double>(static_cast<double>(v.size()) - 1, q * static_cast<double>(v.size())))];
}

// NaN for no samples.
inline double mean(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

}  // namespace tessera
