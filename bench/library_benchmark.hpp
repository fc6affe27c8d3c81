// A kernel library built by `tessera library build` against the JIT: the same GEMMs through the library's C
// function (dlopen'ed) and through a PreparedGemm, interleaved in one process.
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>
#include <vector>

#include "bench/gemm_peer.hpp"
#include "bench/sampling.hpp"

namespace tessera::bench {

// Builds a library of one row-major f32 GEMM kernel for `shapes` on the host's ISA, then times it and the JIT on
// each shape and thread count. Rows: shape, threads, each side's GFLOP/s, library ÷ JIT (paired median).
nlohmann::json run_library_benchmark(const std::vector<GemmShape>& shapes, const std::vector<int>& threads, int repeat,
                                     const Sampling& sampling, std::ostream& log);

}  // namespace tessera::bench
