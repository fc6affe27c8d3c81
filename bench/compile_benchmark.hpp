// What the first call of a new kernel costs: each kernel compiled cold (a fresh runtime, no disk cache) several
// times, the median build time reported with the kernel's run speed, for the demo's kernels and the runtime's
// picks on the quick suite.
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>

#include "bench/sampling.hpp"

namespace tessera::bench {

// Prints its table to `log`; returns one row per kernel: compile_ms (median), compile_ms_min, gflops (median).
nlohmann::json run_compile_benchmark(int repeat, int threads, const Sampling& sampling, std::ostream& log);

}  // namespace tessera::bench
