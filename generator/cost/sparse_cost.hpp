// The analytic cost of the CPU sparse configs: per stored entry, the cycles of its register tile (FMAs, vector loads
// of B's rows, the FMA chains' latency the accumulator sets hide), per row and tile the set-up and epilogue, and
// B's traffic from the level of the memory hierarchy it lives in (the panels' and the prefetch's share). It ranks the
// variant space for the tuner; default_for's config is what the runtime runs untuned.
#pragma once

#include <vector>

#include "generator/core/cpu_target.hpp"
#include "generator/sparse/cpu_sparse_config.hpp"
#include "generator/sparse/sparse_problem.hpp"

namespace tessera {

// Estimated cycles of one call on one thread; only comparisons within one problem are meaningful.
double spmm_cycles(const SpmmProblem& problem, const CpuSpmmConfig& config, const CpuTarget& target);
double sddmm_cycles(const SddmmProblem& problem, const CpuSddmmConfig& config, const CpuTarget& target);

// The side of the square blocks (4, 8 or 16) a CSR pattern with these statistics is best stored in for an SpMM with N
// columns, or 1 where it is best left CSR: each side's time per stored value (zeros included) against the CSR tile's,
// divided by the side's fill. Sides above `max_side` (the tallest block the target's kernel holds) are not chosen.
int square_block_for(const PatternStats& stats, std::int64_t n, int max_side);

// One score per config (lower: predicted faster), default_for's config first, then the estimate's order.
std::vector<double> spmm_scores(const SpmmProblem& problem, const std::vector<CpuSpmmConfig>& configs,
                                const CpuTarget& target);
std::vector<double> sddmm_scores(const SddmmProblem& problem, const std::vector<CpuSddmmConfig>& configs,
                                 const CpuTarget& target);

}  // namespace tessera
