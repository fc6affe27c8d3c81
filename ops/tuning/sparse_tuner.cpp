// The sparse tuners: the variant space ranked by the analytic model (default_for first), the top k compiled and
// timed by the shared interleaved protocol on the caller's pattern with fresh dense operands (a sparse kernel's time
// depends on the pattern, not only on its statistics).
#include <cmath>
#include <random>

#include "generator/core/arith.hpp"
#include "generator/cost/cost_model.hpp"
#include "generator/cost/sparse_cost.hpp"
#include "generator/gemm/gemm_json.hpp"
#include "generator/sparse/cpu_sparse_spec.hpp"
#include "generator/sparse/sparse_json.hpp"
#include "ops/tuning/ranked_measurement.hpp"

namespace tessera {

namespace {

std::vector<float> random_floats(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(std::max<std::size_t>(n, 1));
  for (float& x : v) x = dist(rng);
  return v;
}

// A rows×cols f32 matrix in `layout`'s kind (a strided one: every other element of every other row), or a vector
// of rows·cols elements (unit stride, or 2 for a strided layout): what a binding describes with that layout.
Tensor shaped(std::vector<float>& storage, std::int64_t rows, std::int64_t cols, const Layout& layout, bool vector,
              std::mt19937& rng) {
  const bool strided = layout.kind() == LayoutKind::Strided;
  storage = random_floats(static_cast<std::size_t>(rows * cols * (strided ? 4 : 1)), rng);
  if (vector) return Tensor::vector(storage.data(), rows * cols, strided ? 2 : 1);
  if (strided) return Tensor{storage.data(), DType::f32, {rows, cols}, {4 * cols, 2}};
  return Tensor::matrix(storage.data(), rows, cols,
                        layout.kind() == LayoutKind::ColMajor ? layout : Layout::row_major());
}

// The epilogue's tensors as the signature binds them, sized for an M×N output.
void bind_inputs(const GemmSignature& s, std::int64_t m, std::int64_t n, std::mt19937& rng,
                 std::map<std::string, std::vector<float>>& storage, std::map<std::string, Tensor>& inputs) {
  for (const EpilogueInput& in : s.inputs) {
    if (in.form == IndexForm::MN)
      inputs[in.name] = shaped(storage[in.name], m, n, in.operand.layout, false, rng);
    else
      inputs[in.name] = shaped(storage[in.name], in.form == IndexForm::N ? n : m, 1, in.operand.layout, true, rng);
  }
}

struct SpmmOperands {
  std::vector<float> b, c, d;
  std::vector<std::uint16_t> b16;
  std::map<std::string, std::vector<float>> inputs;
  SpmmArgs args;

  SpmmOperands(const SpmmProblem& p, const SparseMatrix& a, std::shared_ptr<const SparsePlan> plan, unsigned seed) {
    std::mt19937 rng(seed);
    const GemmSignature& s = p.signature.dense;
    args.a = a;
    args.plan = std::move(plan);
    args.threads = p.threads;
    args.epilogue = s.epilogue;
    b = random_floats(static_cast<std::size_t>(p.k * p.n), rng);
    args.b = Tensor::matrix(b.data(), p.k, p.n);
    if (s.b.dtype == DType::bf16) {
      b16.resize(b.size());
      for (std::size_t i = 0; i < b.size(); ++i) b16[i] = to_bf16(b[i]);
      args.b.data = b16.data(), args.b.dtype = DType::bf16;
    }
    d.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, p.m * p.n)));
    args.d = Tensor::matrix(d.data(), p.m, p.n);
    if (s.d.layout.kind() == LayoutKind::ColMajor) args.d = Tensor::matrix(d.data(), p.m, p.n, s.d.layout);
    if (s.c.layout.reads_memory()) {
      args.c = shaped(c, p.m, p.n, s.c.layout, false, rng);
      args.beta = 1;
    }
    bind_inputs(s, p.m, p.n, rng, inputs, args.inputs);
  }
};

struct SddmmOperands {
  std::vector<float> a, b, out;
  std::map<std::string, std::vector<float>> inputs;
  SddmmArgs args;

  SddmmOperands(const SddmmProblem& p, const SparseMatrix& pattern, std::shared_ptr<const SparsePlan> plan,
                unsigned seed) {
    std::mt19937 rng(seed);
    args.pattern = pattern;
    args.plan = std::move(plan);
    args.threads = p.threads;
    args.epilogue = p.signature.dense.epilogue;
    a = random_floats(static_cast<std::size_t>(p.m * p.k), rng);
    b = random_floats(static_cast<std::size_t>(p.n * p.k), rng);
    args.a = Tensor::matrix(a.data(), p.m, p.k);
    args.b = Tensor::matrix(b.data(), p.n, p.k);
    out.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, pattern.entries)));
    args.out = Tensor::vector(out.data(), pattern.entries);
    bind_inputs(p.signature.dense, p.m, p.n, rng, inputs, args.inputs);
  }
};

// The variants of `space` ranked by `scores` (default first), the top k timed in interleaved rounds on `pattern`
// with fresh Operands(problem, pattern, plan, seed), each with the analytic estimate `cycles`.
template <class Config, class Kernel, class Spec, class Operands, class Problem, class Cycles>
SparseTuneResult<Config> tune_sparse(Runtime& runtime, const Problem& problem, const SparseMatrix& pattern,
                                     const char* name, const char* op, const std::vector<Config>& space,
                                     const std::vector<double>& scores, const TuneOptions& options,
                                     MeasurementStore* records, const std::string& family, Cycles cycles,
                                     std::uint64_t order_seed, const std::function<void(int, int)>& progress) {
  const auto plan = std::make_shared<const SparsePlan>(
      SparsePlan::inspect(pattern, problem.threads ? problem.threads : runtime.threads(), name));
  MeasurementLog log(records, {.op = op,
                               .problem = record_problem(problem, plan->fingerprint()),
                               .family = family,
                               .signature = to_json(problem.signature).dump(),
                               .target = runtime.target().str(),
                               .threads = problem.threads ? problem.threads : runtime.threads()});
  const auto make_round = [&](const std::vector<Kernel>& kernels, unsigned seed) {
    auto ops = std::make_shared<const Operands>(problem, pattern, plan, seed);
    TimingRound round;
    round.operands = ops;
    round.prepare = [&kernels, ops](std::size_t i) -> std::function<void()> {
      return [&kernel = kernels[i], ops] { kernel.run(ops->args); };
    };
    return round;
  };
  return measure_ranked<Config, Kernel>(
      space, scores, options, log,
      [&](const Config& c) {
        return Spec{problem.signature, c, runtime.target()};
      },
      [&](const Config& c) { return runtime.compile(problem, c); }, make_round, cycles, order_seed, progress);
}

// Scores that keep the configs in their order.
std::vector<double> in_order(std::size_t n) {
  std::vector<double> scores(n);
  for (std::size_t i = 0; i < n; ++i) scores[i] = static_cast<double>(i);
  return scores;
}

}  // namespace

SparseTuneResult<CpuSpmmConfig> tune_spmm(Runtime& runtime, const SpmmProblem& problem, const SparseMatrix& a,
                                          const TuneOptions& options, MeasurementStore* records,
                                          const std::string& family, const std::function<void(int, int)>& progress) {
  const CpuTarget& target = runtime.target();
  const std::vector<CpuSpmmConfig> space = cpu_spmm_variants(problem, target);
  return tune_sparse<CpuSpmmConfig, SpmmKernel, CpuSpmmSpec, SpmmOperands>(
      runtime, problem, a, "a", "spmm", space, spmm_scores(problem, space, target), options, records, family,
      [&](const CpuSpmmConfig& c) { return spmm_cycles(problem, c, target); },
      static_cast<std::uint64_t>(problem.pattern.nnz * 31 + problem.n), progress);
}

SparseTuneResult<CpuSddmmConfig> tune_sddmm(Runtime& runtime, const SddmmProblem& problem, const SparseMatrix& pattern,
                                            const TuneOptions& options, MeasurementStore* records,
                                            const std::string& family, const std::function<void(int, int)>& progress) {
  const CpuTarget& target = runtime.target();
  const std::vector<CpuSddmmConfig> space = cpu_sddmm_variants(problem, target);
  return tune_sparse<CpuSddmmConfig, SddmmKernel, CpuSddmmSpec, SddmmOperands>(
      runtime, problem, pattern, "pattern", "sddmm", space, sddmm_scores(problem, space, target), options, records,
      family, [&](const CpuSddmmConfig& c) { return sddmm_cycles(problem, c, target); },
      static_cast<std::uint64_t>(problem.pattern.nnz * 37 + problem.k), progress);
}

SparseTuneResult<CpuSpmmConfig> measure_spmm(Runtime& runtime, const SpmmProblem& problem, const SparseMatrix& a,
                                             const std::vector<CpuSpmmConfig>& configs, TuneOptions options,
                                             MeasurementStore* records, const std::string& family) {
  const CpuTarget& target = runtime.target();
  options.exhaustive = true;
  return tune_sparse<CpuSpmmConfig, SpmmKernel, CpuSpmmSpec, SpmmOperands>(
      runtime, problem, a, "a", "spmm", configs, in_order(configs.size()), options, records, family,
      [&](const CpuSpmmConfig& c) { return spmm_cycles(problem, c, target); },
      static_cast<std::uint64_t>(problem.pattern.nnz * 31 + problem.n), {});
}

SparseTuneResult<CpuSddmmConfig> measure_sddmm(Runtime& runtime, const SddmmProblem& problem,
                                               const SparseMatrix& pattern, const std::vector<CpuSddmmConfig>& configs,
                                               TuneOptions options, MeasurementStore* records,
                                               const std::string& family) {
  const CpuTarget& target = runtime.target();
  options.exhaustive = true;
  return tune_sparse<CpuSddmmConfig, SddmmKernel, CpuSddmmSpec, SddmmOperands>(
      runtime, problem, pattern, "pattern", "sddmm", configs, in_order(configs.size()), options, records, family,
      [&](const CpuSddmmConfig& c) { return sddmm_cycles(problem, c, target); },
      static_cast<std::uint64_t>(problem.pattern.nnz * 37 + problem.k), {});
}

}  // namespace tessera
