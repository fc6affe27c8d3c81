// Seeded sparsity patterns for tests and benchmarks: uniform, power-law (R-MAT), banded and block-pruned.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <unordered_set>
#include <vector>

#include "generator/core/error.hpp"
#include "tessera/sparse.hpp"

namespace tessera {

namespace {

constexpr std::int64_t kMaxEntries = std::int64_t{1} << 31;

// SplitMix64: fast and the same on every machine (the standard distributions are not).
struct Random {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(uniform() * static_cast<double>(n)); }
  double value() { return 2 * uniform() - 1; }
};

struct Request {
  std::string kind;
  std::int64_t m = 0, k = 0;
  double density = 0;
  std::uint64_t seed = 1;
  std::int64_t block = 16;
};

[[noreturn]] void fail_request(std::string_view request, const std::string& what) {
  throw InvalidArgument("gen", fmt::format("'{}': {} (expected KIND:M,K,DENSITY[,SEED]; KIND uniform, powerlaw, "
                                           "banded or blocks)",
                                           request, what));
}

Request parse(std::string_view text) {
  Request r;
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) fail_request(text, "no ':'");
  r.kind = std::string(text.substr(0, colon));
  std::vector<std::string_view> parts;
  std::string_view rest = text.substr(colon + 1);
  while (true) {
    const auto comma = rest.find(',');
    parts.push_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  const std::size_t most = r.kind == "blocks" ? 5 : 4;
  if (parts.size() < 3 || parts.size() > most) fail_request(text, fmt::format("{} fields after ':'", parts.size()));
  const auto integer = [&](std::string_view t, const char* what) {
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (ec != std::errc() || end != t.data() + t.size())
      fail_request(text, fmt::format("{} '{}' is not an integer", what, t));
    return v;
  };
  r.m = integer(parts[0], "M");
  r.k = integer(parts[1], "K");
  const std::string d(parts[2]);
  char* end = nullptr;
  r.density = std::strtod(d.c_str(), &end);
  if (d.empty() || end != d.c_str() + d.size() || !(r.density >= 0 && r.density <= 1))
    fail_request(text, fmt::format("density '{}' is not a number in [0, 1]", d));
  if (parts.size() > 3) r.seed = static_cast<std::uint64_t>(integer(parts[3], "SEED"));
  if (parts.size() > 4) r.block = integer(parts[4], "B");
  if (r.m < 0 || r.k < 0 || r.m > (std::int64_t{1} << 31) || r.k > (std::int64_t{1} << 31))
    fail_request(text, "M and K must be in 0..2^31");
  if (r.block < 1 || r.block > 256) fail_request(text, "B must be in 1..256");
  if (static_cast<double>(r.m) * static_cast<double>(r.k) * r.density > static_cast<double>(kMaxEntries))
    fail_request(text, "more than 2^31 entries");
  return r;
}

void add(CooMatrix& coo, std::int64_t i, std::int64_t j, double v) {
  coo.row.push_back(i);
  coo.col.push_back(j);
  coo.value.push_back(v);
}

// `count` distinct columns of [0, k), sorted.
std::vector<std::int64_t> distinct_columns(Random& rng, std::int64_t k, std::int64_t count) {
  std::vector<std::int64_t> cols;
  if (count * 3 > k) {  // dense: keep each column with the right chance, exactly `count` of them
    std::int64_t need = count;
    for (std::int64_t j = 0; j < k && need > 0; ++j)
      if (rng.uniform() * static_cast<double>(k - j) < static_cast<double>(need)) {
        cols.push_back(j);
        --need;
      }
    return cols;
  }
  std::unordered_set<std::int64_t> seen;
  while (static_cast<std::int64_t>(cols.size()) < count) {
    const std::int64_t j = rng.below(k);
    if (seen.insert(j).second) cols.push_back(j);
  }
  std::sort(cols.begin(), cols.end());
  return cols;
}

CooMatrix uniform(const Request& r, Random& rng) {
  CooMatrix coo{r.m, r.k, {}, {}, {}};
  // Per row, density·K entries rounded up or down at random (so the mean is exact).
  const double mean = r.density * static_cast<double>(r.k);
  for (std::int64_t i = 0; i < r.m; ++i) {
    const auto count = std::min(r.k, static_cast<std::int64_t>(std::floor(mean + rng.uniform())));
    for (std::int64_t j : distinct_columns(rng, r.k, count)) add(coo, i, j, rng.value());
  }
  return coo;
}

// R-MAT (Chakrabarti et al.): each edge picks a quadrant per level with probabilities 0.57, 0.19, 0.19, 0.05, which
// gives power-law row and column degrees; duplicates are summed when stored.
CooMatrix powerlaw(const Request& r, Random& rng) {
  CooMatrix coo{r.m, r.k, {}, {}, {}};
  if (r.m == 0 || r.k == 0) return coo;
  const auto edges =
      static_cast<std::int64_t>(std::llround(r.density * static_cast<double>(r.m) * static_cast<double>(r.k)));
  int levels = 0;
  while ((std::int64_t{1} << levels) < std::max(r.m, r.k)) ++levels;
  for (std::int64_t e = 0; e < edges;) {
    std::int64_t i = 0, j = 0;
    for (int l = 0; l < levels; ++l) {
      const double u = rng.uniform();
      const int quadrant = u < 0.57 ? 0 : u < 0.76 ? 1 : u < 0.95 ? 2 : 3;
      i = 2 * i + (quadrant >> 1);
      j = 2 * j + (quadrant & 1);
    }
    if (i >= r.m || j >= r.k) continue;  // outside a side that is not a power of two: draw again
    add(coo, i, j, rng.value());
    ++e;
  }
  return coo;
}

CooMatrix banded(const Request& r, Random& rng) {
  CooMatrix coo{r.m, r.k, {}, {}, {}};
  const auto half = static_cast<std::int64_t>(std::floor(r.density * static_cast<double>(r.k) / 2));
  for (std::int64_t i = 0; i < r.m; ++i) {
    const std::int64_t centre = r.m > 0 ? i * r.k / r.m : 0;
    for (std::int64_t j = std::max<std::int64_t>(0, centre - half); j <= std::min(r.k - 1, centre + half); ++j)
      add(coo, i, j, rng.value());
  }
  return coo;
}

CooMatrix blocks(const Request& r, Random& rng) {
  CooMatrix coo{r.m, r.k, {}, {}, {}};
  const std::int64_t block_rows = (r.m + r.block - 1) / r.block, block_cols = (r.k + r.block - 1) / r.block;
  const auto keep = static_cast<std::int64_t>(std::llround(r.density * static_cast<double>(block_cols)));
  for (std::int64_t bi = 0; bi < block_rows; ++bi)
    for (std::int64_t bj : distinct_columns(rng, block_cols, keep))
      for (std::int64_t i = bi * r.block; i < std::min(r.m, (bi + 1) * r.block); ++i)
        for (std::int64_t j = bj * r.block; j < std::min(r.k, (bj + 1) * r.block); ++j) add(coo, i, j, rng.value());
  return coo;
}

}  // namespace

CooMatrix generate_pattern(std::string_view text) {
  const Request r = parse(text);
  Random rng{r.seed * 0x2545f4914f6cdd1dULL + 1};
  if (r.kind == "uniform") return uniform(r, rng);
  if (r.kind == "powerlaw") return powerlaw(r, rng);
  if (r.kind == "banded") return banded(r, rng);
  if (r.kind == "blocks") return blocks(r, rng);
  fail_request(text, "unknown kind '" + r.kind + "'");
}

}  // namespace tessera
