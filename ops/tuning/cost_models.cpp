#include "tessera/cost_models.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "generator/core/error.hpp"
#include "generator/cost/learned_model.hpp"
#include "generator/gemm/grid_plan.hpp"
#include "jit/disk_cache.hpp"
#include "tessera/measurement_store.hpp"

namespace tessera {

// Generated from models/*.json by scripts/embed_models.cmake.
const std::map<std::string, std::string>& embedded_models();

const std::string& shipped_model_text(const std::string& target) {
  static const std::string none;
  const auto& models = embedded_models();
  const auto it = models.find(target);
  return it == models.end() ? none : it->second;
}

std::string calibrated_model_path(const CpuTarget& target) {
  std::string dir;
  try {
    dir = tessera_cache_dir_path();  // a lookup: nothing created
  } catch (const std::exception&) {
    return "";
  }
  std::string key = target.cost_model_key();
  for (char& c : key)
    if (c == ':') c = '_';
  const std::string host = host_hardware();
  return fmt::format("{}/models/{}-{:016x}.json", dir, key, XXH3_64bits(host.data(), host.size()));
}

namespace {
// This host's calibrated model for the target, read once per process and target; null when there is none (or it
// does not load: then the shipped model serves, and the verbose log says why).
std::shared_ptr<const LearnedCpuModel> calibrated_model(const CpuTarget& target) {
  static std::mutex mutex;
  static auto* loaded = new std::map<std::string, std::shared_ptr<const LearnedCpuModel>>();
  std::lock_guard lock(mutex);
  const auto [at, added] = loaded->try_emplace(target.cost_model_key());
  if (!added) return at->second;
  const std::string path = calibrated_model_path(target);
  std::ifstream in(path);
  if (!in) return nullptr;
  std::stringstream text;
  text << in.rdbuf();
  try {
    auto model = LearnedCpuModel::from_json(text.str(), "calibrated");
    if (model->target() == target.str()) at->second = std::move(model);
  } catch (const Error&) {
  }
  return at->second;
}
}  // namespace

LoadedCostModel load_cpu_cost_model(const std::string& which, const CpuTarget& target) {
  if (which == "heuristic") return {nullptr, ""};
  if (which == "analytic") return {std::make_shared<AnalyticCpuModel>(), ""};
  if (which == "default")
    if (auto calibrated = calibrated_model(target)) return {calibrated, ""};
  if (which == "default" || which == "shipped") {
    const std::string& text = shipped_model_text(target.cost_model_key());
    if (text.empty())
      return {std::make_shared<DefaultFirstCpuModel>(), "no learned model was trained for " + target.cost_model_key() +
                                                            ": the default config first, then the analytic order"};
    // Parsed once per process and target, and never destroyed: XGBoost's own globals may be gone by then.
    static std::mutex mutex;
    static auto* shipped = new std::map<std::string, std::shared_ptr<const LearnedCpuModel>>();
    std::lock_guard lock(mutex);
    auto& model = (*shipped)[target.cost_model_key()];
    if (!model) model = LearnedCpuModel::from_json(text);
    return {model, ""};
  }
  std::ifstream in(which);
  if (!in) throw InvalidArgument("--model", "cannot read '" + which + "' (default, analytic, heuristic or a file)");
  std::stringstream text;
  text << in.rdbuf();
  auto model = LearnedCpuModel::from_json(text.str());
  if (model->target() != target.str()) return {model, "trained for " + model->target() + ", used on " + target.str()};
  if (model->vector_fmas_per_cycle() != 0 && model->vector_fmas_per_cycle() != target.vector_fmas_per_cycle)
    return {model, fmt::format("trained on a core issuing {} vector FMAs per cycle, used on one issuing {}",
                               model->vector_fmas_per_cycle(), target.vector_fmas_per_cycle)};
  return {model, ""};
}

// (16³×1024 on 2 threads, ranked whole, took the 8×32 tiles of a batch streamed from L3; its 512-matrix shares sit in
// each core's L2, where 16×16 tiles ran 7-13% faster, interleaved in one process.)
GemmProblem thread_share(GemmProblem p, int threads) {
  if (threads > 1 && p.batch >= threads) p.batch = (p.batch + threads - 1) / threads;
  return p;
}

GemmProblem problem_on_threads(const GemmProblem& p, int threads) {
  if (threads > 1 && p.batch >= threads) {
    GemmProblem share = thread_share(p, threads);
    share.threads = 1;
    return share;
  }
  GemmProblem whole = p;
  whole.threads = std::max(1, threads);
  return whole;
}

double split_share(const GemmProblem& whole, const CpuGemmConfig& config, int threads) {
  return threads <= 1 ? 1.0 : plan_grid(whole.m, whole.n, whole.k, whole.batch, config, threads).time_share;
}

std::vector<double> score_on_threads(const CpuCostModel& model, const GemmProblem& whole, const GemmProblem& ranked,
                                     const std::vector<CpuGemmConfig>& space, const CpuTarget& target, int threads) {
  GemmProblem scored = ranked;
  // A model of several thread counts sees a batch split by matrices as each thread's one-thread share, one split
  // within its matrices with its threads; a model of one-thread records sees what those records timed.
  scored.threads = !model.ranks_threads()                                 ? 0
                   : ranked.batch < whole.batch || whole.batch >= threads ? 1
                                                                          : std::max(1, threads);
  std::vector<double> scores = model.score(scored, space, target);
  const double unit = model.score_per_doubling();
  if (threads <= 1 || unit <= 0) return scores;
  for (std::size_t i = 0; i < space.size(); ++i) scores[i] += unit * std::log2(split_share(whole, space[i], threads));
  return scores;
}

}  // namespace tessera
