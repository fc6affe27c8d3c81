// Variant spaces: every config of the Config vocabulary worth considering for a problem on a target, pruned by
// validate() and resource limits. The tuner measures them; the cost model ranks them.
#pragma once

#include <vector>

#include "generator/core/cpu_target.hpp"
#include "generator/gemm/cpu_gemm_config.hpp"
#include "generator/gemm/cuda_gemm_config.hpp"
#include "generator/gemm/gemm_problem.hpp"

namespace tessera {

// CPU: register tile (MR × NR) × K slab (KC) × B packing, with MC/NC derived from the caches as default_for does;
// wide GEMV-like tiles for M ≤ 8; fixed-size kernels for problems ≤ 64 in each dimension. default_for's own choice
// is always in the space. Deterministic order.
std::vector<CpuGemmConfig> cpu_variants(const GemmProblem& problem, const CpuTarget& target);

// A general (not fixed-size) kernel's tile taller than the shortest tile that covers all of the problem's rows: the
// rows past the edge are clamped to the last one and recomputed, so such a tile only wastes FMAs (in the Xeon records,
// the shortest covering tile is within 2.4% of the taller ones' best on every problem). Out of the space.
bool recomputes_rows(const GemmProblem& problem, const CpuGemmConfig& config);

// The space before tiles that recompute rows were pruned: what a variant's relative features are measured against,
// so that pruning what the ranker may pick leaves every variant's features (and the trained models) as they were.
std::vector<CpuGemmConfig> cpu_feature_reference(const GemmProblem& problem, const CpuTarget& target);

// CUDA: block tile × warp tile × block_k × stages × split-K × rasterisation group, with the alignment the problem's
// packed operands allow.
std::vector<CudaGemmConfig> cuda_variants(const GemmProblem& problem, const CudaTarget& target);

}  // namespace tessera
