// What a call costs before the kernel starts: tessera's three call paths (Runtime::gemm, GemmKernel::run,
// PreparedGemm::run) on small GEMMs, against LIBXSMM's dispatch-and-call and its call of a kernel already dispatched,
// one thread, interleaved in one process.
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>
#include <vector>

#include "bench/gemm_peer.hpp"
#include "bench/sampling.hpp"

namespace tessera::bench {

// Prints its table to `log`; returns one row per shape with each path's median ns per call.
nlohmann::json run_dispatch_benchmark(const std::vector<GemmShape>& shapes, int repeat, const Sampling& sampling,
                                      std::ostream& log);

}  // namespace tessera::bench
