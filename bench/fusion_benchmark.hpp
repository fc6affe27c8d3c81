// Epilogue fusion: what gelu(acc + bias[n]) costs fused into tessera's GEMM, against the plain GEMM and against
// oneDNN's matmul with the same epilogue fused (post-op) and as a separate elementwise pass.
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <vector>

#include "bench/gemm_peer.hpp"
#include "bench/sampling.hpp"

namespace tessera::bench {

// Prints its table to `log` as rows complete; returns the rows as JSON.
nlohmann::json run_fusion_benchmark(const std::vector<GemmShape>& shapes, const std::vector<int>& threads, int repeat,
                                    const Sampling& sampling, std::ostream& log);

}  // namespace tessera::bench
