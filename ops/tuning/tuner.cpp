#include "tessera/tuner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <future>
#include <map>
#include <numeric>
#include <random>

#include "generator/core/arith.hpp"
#include "generator/core/error.hpp"
#include "generator/gemm/gemm_json.hpp"
#include "generator/gemm/gemm_variants.hpp"
#include "ops/tuning/ranked_measurement.hpp"
#include "tessera/cost_models.hpp"

namespace tessera {

namespace {
// Owned operands for timing a problem: random values in the signature's types and layouts, with a C and the
// epilogue's tensors where the signature reads them, so that the arguments describe exactly that signature.
struct Operands {
  std::vector<float> a, b, c, d;
  std::vector<std::uint8_t> a_narrow, b_narrow;  // A and B stored in bf16, u8 or i8
  std::map<std::string, std::vector<float>> inputs;
  GemmArgs args;
  Operands(const GemmProblem& p, unsigned seed) {
    const GemmSignature& s = p.signature;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const auto make = [&](std::vector<float>& v, std::vector<std::uint8_t>& narrow, const OperandSignature& op,
                          std::int64_t rows, std::int64_t cols) {
      v.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, p.batch * rows * cols)));
      for (auto& x : v) x = dist(rng);
      void* data = v.data();
      if (op.dtype == DType::bf16 || op.dtype == DType::u8 || op.dtype == DType::i8) {
        narrow.resize(v.size() * static_cast<std::size_t>(dtype_bytes(op.dtype)));
        for (std::size_t i = 0; i < v.size(); ++i)
          if (op.dtype == DType::bf16) {
            const std::uint16_t h = to_bf16(v[i]);
            std::memcpy(&narrow[2 * i], &h, 2);
          } else {  // [-1, 1] spread over the type's range
            narrow[i] =
                static_cast<std::uint8_t>(std::lround(op.dtype == DType::u8 ? (v[i] + 1) * 127.5f : v[i] * 127));
          }
        data = narrow.data();
      }
      return p.batch == 1 ? Tensor::matrix(data, rows, cols, op.layout, 0, op.dtype)
                          : Tensor::batched(data, p.batch, rows, cols, op.layout, 0, 0, op.dtype);
    };
    std::vector<std::uint8_t> unused;
    args.a = make(a, a_narrow, s.a, p.m, p.k);
    args.b = make(b, b_narrow, s.b, p.k, p.n);
    args.d = make(d, unused, s.d, p.m, p.n);
    args.epilogue = s.epilogue;
    if (s.c.layout.reads_memory()) {
      args.c = make(c, unused, s.c, p.m, p.n);
      args.beta = 1;  // read, as the signature says
    }
    for (const EpilogueInput& in : s.inputs) {
      const std::int64_t length = in.form == IndexForm::M ? p.m : p.n;
      const bool strided = in.operand.layout.kind() == LayoutKind::Strided;
      std::vector<float>& v = inputs[in.name];
      if (in.form == IndexForm::MN) {
        const OperandSignature op{DType::f32, strided ? Layout::row_major() : in.operand.layout};
        args.inputs[in.name] = make(v, unused, op, p.m, p.n);
        if (strided) {  // every other element: neither stride is 1
          v.resize(2 * v.size());
          args.inputs[in.name].data = v.data();
          for (auto& stride : args.inputs[in.name].strides) stride *= 2;
        }
        continue;
      }
      v.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, (strided ? 2 : 1) * length)));
      for (auto& x : v) x = dist(rng);
      args.inputs[in.name] = Tensor::vector(v.data(), length, strided ? 2 : 1);
    }
  }
  const void* b_data() const { return b_narrow.empty() ? static_cast<const void*>(b.data()) : b_narrow.data(); }
  std::size_t b_bytes() const { return b_narrow.empty() ? b.size() * sizeof(float) : b_narrow.size(); }
};
}  // namespace

Tuner::Tuner(Runtime& runtime, std::shared_ptr<const CpuCostModel> model, MeasurementStore* records,
             TuneOptions options)
    : runtime_(runtime), model_(std::move(model)), records_(records), options_(options) {
  if (options_.samples < 1) throw InvalidArgument("samples", "must be at least 1");
  if (!(options_.sample_ms > 0)) throw InvalidArgument("sample_ms", "must be positive");
  if (options_.refine_samples < 0) throw InvalidArgument("refine_samples", "must not be negative");
  if (!(options_.refine_within >= 0)) throw InvalidArgument("refine_within", "must not be negative");
}

namespace {
// The problem as the runtime describes the operands timed for it: one row of a column-major matrix (leading
// dimension 1) has unit strides both ways, and the binding calls it row-major. Compiled as asked, a 1×N×K problem
// with a column-major A was refused at its first call (the arguments describe another signature).
GemmProblem as_timed(const GemmProblem& asked) {
  GemmProblem problem = asked;
  for (auto [op, rows] : {std::pair{&problem.signature.a, asked.m}, {&problem.signature.b, asked.k}})
    if (op->layout.kind() == LayoutKind::ColMajor && rows <= 1) op->layout = Layout::row_major();
  return problem;
}
}  // namespace

TuneResult Tuner::tune(const GemmProblem& asked, const std::string& family,
                       const std::function<void(int, int)>& progress) {
  const GemmProblem problem = as_timed(asked);
  const CpuTarget& target = runtime_.target();
  const std::vector<CpuGemmConfig> space = cpu_variants(problem, target);
  GemmProblem ranked = problem;  // the model ranks for the conditions the variants are timed in
  ranked.b_cold = problem.b_cold || options_.cold_b;
  // The model ranks the problems it covers; others (an int8 GEMM for a model of f32 records) the analytic model.
  const AnalyticCpuModel analytic;
  const CpuCostModel& ranker = model_->covers(ranked, target) ? *model_ : analytic;
  // Ranked for the threads the variants are timed on.
  const std::vector<std::size_t> order =
      rank_by_score(score_on_threads(ranker, problem, ranked, space, target, runtime_.threads()));
  const std::size_t take = options_.exhaustive ? space.size() : std::min<std::size_t>(options_.top_k, space.size());
  std::vector<CpuGemmConfig> chosen;
  for (std::size_t i = 0; i < take; ++i) chosen.push_back(space[order[i]]);
  TuneResult result = measure(problem, chosen, family, progress);
  result.space = space.size();
  result.ranked_by = ranker.name();
  return result;
}

TuneResult Tuner::measure(const GemmProblem& asked, const std::vector<CpuGemmConfig>& configs,
                          const std::string& family, const std::function<void(int, int)>& progress) {
  const GemmProblem problem = as_timed(asked);
  const CpuTarget& target = runtime_.target();
  TuneResult result;
  result.problem = problem;
  result.space = configs.size();
  result.ranked_by = "given";
  MeasurementLog log(records_, {.op = "gemm",
                                .problem = record_problem(problem),
                                .family = family,
                                .signature = to_json(problem.signature).dump(),
                                .target = target.str(),
                                .threads = runtime_.threads(),
                                .b_cold = options_.cold_b});

  // Compile what is not on record yet, all at once (the JIT serialises code generation, not the rest).
  struct Candidate {
    CpuGemmConfig config;
    CpuGemmSpec spec;
    std::shared_future<GemmKernel> kernel;
    double recorded_ns = -1;
  };
  std::vector<Candidate> candidates;
  for (const CpuGemmConfig& config : configs) {
    Candidate c{config, CpuGemmSpec{problem.signature, config, target}, {}, -1};
    c.recorded_ns = log.recorded_ns(c.spec.hash().hex());
    if (c.recorded_ns < 0)
      c.kernel = std::async(std::launch::async, [this, &problem, config = c.config] {
                   return runtime_.compile(problem, config);
                 }).share();
    candidates.push_back(std::move(c));
  }

  // Every compile finishes (or runs out of time) before the first measurement, so none runs beside a timed call.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.compile_limit_s);
  std::vector<bool> ready(candidates.size(), false);
  for (std::size_t i = 0; i < candidates.size(); ++i)
    ready[i] = candidates[i].recorded_ns >= 0 ||
               candidates[i].kernel.wait_until(deadline) == std::future_status::ready;  // late ones are left out

  // Measured in interleaved rounds on fresh operands (interleaved_timing): where B's pages land in the physically
  // indexed L2 and L3 decided some variants' times (a skinny 7x1024x3072 variant took 342 µs in one process and
  // 1805 µs in the next), so no single allocation may decide a rank.
  std::vector<GemmKernel> kernels;
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (ready[i] && candidates[i].recorded_ns < 0) kernels.push_back(candidates[i].kernel.get());
  const auto make_round = [&](unsigned seed) {
    auto ops = std::make_shared<const Operands>(problem, seed);
    TimingRound round;
    round.operands = ops;
    round.prepare = [&kernels, ops](std::size_t i) -> std::function<void()> {
      return [prepared = kernels[i].prepare(ops->args)] { prepared.run(); };
    };
    round.cold_data = ops->b_data();
    round.cold_bytes = ops->b_bytes();
    return round;
  };
  TimingOptions timing = timing_options(options_);
  timing.cold = options_.cold_b;
  const std::vector<std::vector<double>> timed =
      time_interleaved(kernels.size(), make_round, timing,
                       static_cast<std::uint64_t>(problem.m * 7919 + problem.n * 104729 + problem.k), progress);
  std::size_t next_timed = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (!ready[i]) continue;
    VariantMeasurement m;
    m.config = c.config;
    m.spec_hash = c.spec.hash().hex();
    if (c.recorded_ns >= 0) {
      m.from_records = true;
      m.median_ns = c.recorded_ns;
    } else {
      ++result.compiled;
      const SampleSummary summary = summarise(timed[next_timed++]);
      m.median_ns = summary.median_ns;
      m.spread = summary.spread;
      log.add(m.spec_hash, to_json(c.config).dump(), summary);
    }
    result.measured.push_back(m);
  }
  log.commit();
  double best = INFINITY;
  for (std::size_t i = 0; i < result.measured.size(); ++i)
    if (result.measured[i].median_ns < best) {
      best = result.measured[i].median_ns;
      result.best = i;
    }
  return result;
}

}  // namespace tessera
