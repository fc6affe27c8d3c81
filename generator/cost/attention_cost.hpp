// The analytic cost of a CPU attention config: cycles the register tiles' FMAs, the softmax passes, the packing and the
// per-block overheads take, and the bytes a bandwidth-bound (in-place) config must read. It ranks the variant space
// for the tuner; default_for's config, measured on each ISA, is what the runtime runs untuned.
#pragma once

#include <vector>

#include "generator/attention/attention_problem.hpp"
#include "generator/attention/cpu_attention_config.hpp"
#include "generator/core/cpu_target.hpp"

namespace tessera {

// Estimated cycles of one call on one thread; only comparisons within one problem are meaningful.
double attention_cycles(const AttentionProblem& problem, const CpuAttentionConfig& config, const CpuTarget& target);

// One score per config (lower: predicted faster), default_for's config first where it is among them, then the
// estimate's order.
std::vector<double> attention_scores(const AttentionProblem& problem, const std::vector<CpuAttentionConfig>& configs,
                                     const CpuTarget& target);

}  // namespace tessera
