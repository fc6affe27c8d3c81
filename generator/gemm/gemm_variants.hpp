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

// A general f32 kernel that packs a row-major B for one or two rows of A: each packed element serves at most two
// FMAs, so the packing pass costs about what reading B in place does (over the Zen 4 records' 112 problems of M <= 2,
// leaving these out cost the best 0.18% on average, 11% at most, while the model picked them on fresh shapes 5-41%
// slower than the best in place). Out of the space.
bool packs_b_for_few_rows(const GemmProblem& problem, const CpuGemmConfig& config);

// Either of the two above: what the space the runtime ranks leaves out.
bool outside_space(const GemmProblem& problem, const CpuGemmConfig& config);

// The space before outside_space pruned it: what a variant's relative features are measured against,
// so that pruning what the ranker may pick leaves every variant's features (and the trained models) as they were.
std::vector<CpuGemmConfig> cpu_feature_reference(const GemmProblem& problem, const CpuTarget& target);

// CUDA: block tile × warp tile × block_k × stages × split-K × rasterisation group, with the alignment the problem's
// packed operands allow.
std::vector<CudaGemmConfig> cuda_variants(const GemmProblem& problem, const CudaTarget& target);

}  // namespace tessera
