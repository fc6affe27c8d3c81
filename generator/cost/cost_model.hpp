// Cost models rank the variants of a problem so that only the few worth it are compiled: the analytic models
// (roofline with cache and occupancy terms; the fallback, and the only model for a target with no measurements)
// and the learned model (generator/cost/learned_model.hpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "generator/core/cpu_target.hpp"
#include "generator/gemm/cpu_gemm_config.hpp"
#include "generator/gemm/cuda_gemm_config.hpp"
#include "generator/gemm/gemm_problem.hpp"

namespace tessera {

class CpuCostModel {
 public:
  virtual ~CpuCostModel() = default;
  virtual std::string name() const = 0;
  // One score per config; lower means predicted faster. Scores compare only within one call.
  virtual std::vector<double> score(const GemmProblem& problem, const std::vector<CpuGemmConfig>& configs,
                                    const CpuTarget& target) const = 0;
  // Whether the model's choices can be trusted for this problem on this target (a learned model only near what it
  // was trained on).
  virtual bool covers(const GemmProblem&, const CpuTarget&) const { return true; }
  // What a doubling of the predicted time adds to a score, where scores are on that scale (0: they are not), so that
  // a caller can add what the model does not see (how evenly a config's tiles split over threads).
  virtual double score_per_doubling() const { return 0; }
  // Whether score() ranks the problem for its `threads` itself (the split over them among what it learned), rather
  // than as one thread's call.
  virtual bool ranks_threads() const { return false; }
};

class AnalyticCpuModel : public CpuCostModel {
 public:
  std::string name() const override { return "analytic"; }
  std::vector<double> score(const GemmProblem& problem, const std::vector<CpuGemmConfig>& configs,
                            const CpuTarget& target) const override;
};

// For a target with no learned model: default_for's config first (hand rules measured on each ISA), then the
// analytic order. The analytic top-1 alone is the worse choice: on the cpu:avx512 records (423 problems) its mean
// top-1 regret is 18.9% against the default's 12.1%, and on an AVX2 Zen 3 it picked B read in place for 1024³
// (47 GFLOP/s, 1 thread) over default_for's packed B (81).
class DefaultFirstCpuModel : public CpuCostModel {
 public:
  std::string name() const override { return "default+analytic"; }
  std::vector<double> score(const GemmProblem& problem, const std::vector<CpuGemmConfig>& configs,
                            const CpuTarget& target) const override;
};

// CUDA has only the analytic model until records from a GPU exist.
std::vector<double> cuda_analytic_scores(const GemmProblem& problem, const std::vector<CudaGemmConfig>& configs,
                                         const CudaTarget& target);

// Indices of `scores` from best (lowest) to worst; ties keep their order.
std::vector<std::size_t> rank_by_score(const std::vector<double>& scores);

}  // namespace tessera
