// Features of problem × config × target for the cost models: raw parameters and derived analytic quantities (tiles,
// padding waste, arithmetic intensity, working sets against each cache level), plus the analytic time estimate.
#pragma once

#include <string>
#include <vector>

#include "generator/core/cpu_target.hpp"
#include "generator/gemm/cpu_gemm_config.hpp"
#include "generator/gemm/cuda_gemm_config.hpp"
#include "generator/gemm/gemm_problem.hpp"

namespace tessera {

const std::vector<std::string>& cpu_feature_names();
// One row of cpu_feature_names() per config, row-major. Some features compare a config with a reference set: by
// default the problem's whole variant space, which is enumerated once per call (rank many configs of a problem in
// one call); a caller that reads only the other features may pass a smaller one.
std::vector<float> cpu_feature_rows(const GemmProblem& problem, const std::vector<CpuGemmConfig>& configs,
                                    const CpuTarget& target, const std::vector<CpuGemmConfig>* reference = nullptr);
std::vector<float> cpu_features(const GemmProblem& problem, const CpuGemmConfig& config, const CpuTarget& target);

// The analytic estimate of a CPU GEMM's time in core cycles on one thread: register-tile throughput (FMA and load
// ports), partial-sum and packing traffic, per-tile and per-call overheads, and memory traffic against the caches.
double cpu_analytic_cycles(const GemmProblem& problem, const CpuGemmConfig& config, const CpuTarget& target);

// The parts of that estimate, each in cycles; the features keep them apart so the learned model can weigh them.
struct CpuAnalyticParts {
  double compute = 0;  // register-tile K steps
  double tiles = 0;    // partial sums and calls per micro-tile and K slab
  double packing = 0;  // packing B
  double memory = 0;   // operand traffic beyond L2, at one core's share of DRAM bandwidth
  double b_reads = 0;  // times B streams from beyond L2
  double call = 0;     // per call
  double total() const;
};
CpuAnalyticParts cpu_analytic_parts(const GemmProblem& problem, const CpuGemmConfig& config, const CpuTarget& target);

}  // namespace tessera
