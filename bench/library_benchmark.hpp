// A kernel library built by `tessera library build` against the JIT: the same GEMMs through the library's C
// function (dlopen'ed) and through a PreparedGemm, interleaved in one process.
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>
#include <vector>

#include "bench/attention_benchmark.hpp"
#include "bench/gemm_peer.hpp"
#include "bench/sampling.hpp"
#include "bench/sparse_benchmark.hpp"

namespace tessera::bench {

// Builds a library of one row-major f32 GEMM kernel for `shapes`, for `sparse` cases (generated patterns, CSR) one
// SpMM (N = the case's dense size) and one SDDMM kernel (K = it), and for `attention` shapes (f32, BHSD) an attention
// kernel per head dimension and causality, on the host's ISA; then times each against the JIT's kernel of the same op
// on each shape and thread count. Rows: op, shape, threads, each side's GFLOP/s, library ÷ JIT (paired median),
// whether they agree.
nlohmann::json run_library_benchmark(const std::vector<GemmShape>& shapes, const std::vector<SparseCase>& sparse,
                                     const std::vector<AttentionShape>& attention, const std::vector<int>& threads,
                                     int repeat, const Sampling& sampling, std::ostream& log);

}  // namespace tessera::bench
