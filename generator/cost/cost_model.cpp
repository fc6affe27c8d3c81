#include "generator/cost/cost_model.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include "generator/gemm/cuda_gemm_model.hpp"
#include "generator/gemm/gemm_features.hpp"

namespace tessera {

std::vector<double> AnalyticCpuModel::score(const GemmProblem& problem, const std::vector<CpuGemmConfig>& configs,
                                            const CpuTarget& target) const {
  std::vector<double> scores;
  scores.reserve(configs.size());
  for (const auto& c : configs) scores.push_back(cpu_analytic_cycles(problem, c, target));
  return scores;
}

std::vector<double> DefaultFirstCpuModel::score(const GemmProblem& problem, const std::vector<CpuGemmConfig>& configs,
                                                const CpuTarget& target) const {
  std::vector<double> scores = AnalyticCpuModel().score(problem, configs, target);
  const CpuGemmConfig first = CpuGemmConfig::default_for(problem, target);
  for (std::size_t i = 0; i < configs.size(); ++i)
    if (configs[i] == first) scores[i] = -std::numeric_limits<double>::infinity();
  return scores;
}

std::vector<double> cuda_analytic_scores(const GemmProblem& problem, const std::vector<CudaGemmConfig>& configs,
                                         const CudaTarget& target) {
  std::vector<double> scores;
  scores.reserve(configs.size());
  for (const auto& c : configs) scores.push_back(cuda_analytic_seconds(problem, c, target));
  return scores;
}

std::vector<std::size_t> rank_by_score(const std::vector<double>& scores) {
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  return order;
}

}  // namespace tessera
