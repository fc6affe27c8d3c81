#include "tessera/tuner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <future>
#include <numeric>
#include <random>

#include "generator/core/arith.hpp"
#include "generator/core/error.hpp"
#include "generator/gemm/gemm_variants.hpp"
#include "jit/cache_eviction.hpp"

namespace tessera {

namespace {
// Owned operands for timing a problem: random values in the signature's types and layouts, C not read.
struct Operands {
  std::vector<float> a, b, d;
  std::vector<std::uint16_t> a16, b16;
  GemmArgs args;
  Operands(const GemmProblem& p, unsigned seed) {
    const GemmSignature& s = p.signature;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const auto make = [&](std::vector<float>& v, std::vector<std::uint16_t>& v16, const OperandSignature& op,
                          std::int64_t rows, std::int64_t cols) {
      v.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, p.batch * rows * cols)));
      for (auto& x : v) x = dist(rng);
      void* data = v.data();
      if (op.dtype == DType::bf16) {
        v16.resize(v.size());
        for (std::size_t i = 0; i < v.size(); ++i) v16[i] = to_bf16(v[i]);
        data = v16.data();
      }
      return p.batch == 1 ? Tensor::matrix(data, rows, cols, op.layout, 0, op.dtype)
                          : Tensor::batched(data, p.batch, rows, cols, op.layout, 0, 0, op.dtype);
    };
    std::vector<std::uint16_t> unused;
    args.a = make(a, a16, s.a, p.m, p.k);
    args.b = make(b, b16, s.b, p.k, p.n);
    args.d = make(d, unused, s.d, p.m, p.n);
  }
  const void* b_data() const { return b16.empty() ? static_cast<const void*>(b.data()) : b16.data(); }
  std::size_t b_bytes() const { return b16.empty() ? b.size() * sizeof(float) : b16.size() * sizeof(std::uint16_t); }
};

double seconds(const std::function<void()>& call, int calls) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) call();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}
}  // namespace

Tuner::Tuner(Runtime& runtime, std::shared_ptr<const CpuCostModel> model, TuningRecords* records, TuneOptions options)
    : runtime_(runtime),
      model_(std::move(model)),
      records_(records),
      options_(options),
      hardware_(TuningRecords::host_hardware()) {
  if (options_.samples < 1) throw InvalidArgument("samples", "must be at least 1");
  if (!(options_.sample_ms > 0)) throw InvalidArgument("sample_ms", "must be positive");
  if (options_.refine_samples < 0) throw InvalidArgument("refine_samples", "must not be negative");
  if (!(options_.refine_within >= 0)) throw InvalidArgument("refine_within", "must not be negative");
}

TuneResult Tuner::tune(const GemmProblem& asked, const std::string& family,
                       const std::function<void(int, int)>& progress) {
  // The problem as the runtime describes the operands timed for it: one row of a column-major matrix (leading
  // dimension 1) has unit strides both ways, and the binding calls it row-major. Compiled as asked, a 1×N×K problem
  // with a column-major A was refused at its first call (the arguments describe another signature).
  GemmProblem problem = asked;
  for (auto [op, rows] : {std::pair{&problem.signature.a, asked.m}, {&problem.signature.b, asked.k}})
    if (op->layout.kind() == LayoutKind::ColMajor && rows <= 1) op->layout = Layout::row_major();
  const CpuTarget& target = runtime_.target();
  const std::vector<CpuGemmConfig> space = cpu_variants(problem, target);
  TuneResult result;
  result.problem = problem;
  result.space = space.size();
  result.ranked_by = model_->name();
  GemmProblem ranked = problem;  // the model ranks for the conditions the variants are timed in
  ranked.b_cold = problem.b_cold || options_.cold_b;
  const std::vector<std::size_t> order = rank_by_score(model_->score(ranked, space, target));
  const std::size_t take = options_.exhaustive ? space.size() : std::min<std::size_t>(options_.top_k, space.size());
  const int threads = runtime_.threads();

  // Compile what is not on record yet, all at once (the JIT serialises code generation, not the rest).
  struct Candidate {
    CpuGemmConfig config;
    CpuGemmSpec spec;
    std::shared_future<GemmKernel> kernel;
    double recorded_ns = -1;
  };
  std::vector<Candidate> candidates;
  for (std::size_t i = 0; i < take; ++i) {
    Candidate c{space[order[i]], CpuGemmSpec{problem.signature, space[order[i]], target}, {}, -1};
    if (records_)
      c.recorded_ns = records_->recorded_ns(c.spec.hash().hex(), problem.m, problem.n, problem.k, problem.batch,
                                            threads, hardware_, options_.cold_b);
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

  // Measure in interleaved rounds, each on a fresh allocation of the operands: a round times every candidate once,
  // in a new random order, so a slow spell of the shared machine lands on all candidates alike; and the median
  // over rounds is a median over physical page placements. Reading B in place, some variants' times depend on
  // where B's pages land in the physically indexed L2 and L3: a skinny 7x1024x3072 variant took 342 µs in one
  // process and 1805 µs in the next (the fastest of 7 samples each), so a single allocation decided its rank.
  struct Timed {
    GemmKernel kernel;
    int calls = 1;
    double once = 0;  // seconds per call, from calibration
    std::vector<double> samples;
  };
  std::vector<Timed> timed;
  {
    const Operands ops(problem, 17u);
    // The fastest of three calls: a single call of a short kernel hit by an interrupt or a slow spell of the VM
    // looked 4x slower and dropped the variant with that one time (a 251x13x193 variant was recorded at 5.6x
    // its twin, whose KC also covers all of K).
    const auto calibrate = [&](Timed& t) {
      const PreparedGemm prepared = t.kernel.prepare(ops.args);
      const auto call = [&] { prepared.run(); };
      for (int call_index = 0; call_index < 3; ++call_index)
        t.once = std::min(t.once,
                          options_.cold_b ? cold_call_seconds(call, 1, ops.b_data(), ops.b_bytes()) : seconds(call, 1));
      t.calls = static_cast<int>(std::clamp(options_.sample_ms / 1e3 / std::max(t.once, 1e-9), 1.0, 1e6));
    };
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      if (!ready[i] || candidates[i].recorded_ns >= 0) continue;
      Timed t{candidates[i].kernel.get(), 1, INFINITY, {}};
      seconds([&] { t.kernel.prepare(ops.args).run(); }, 1);  // warm-up
      calibrate(t);
      timed.push_back(std::move(t));
    }
    // A variant more than 4x slower than the fastest is calibrated once more, later, before it is dropped: three
    // calls in a row can all land in one slow spell (B cold, a 6x6144x768 variant calibrated at 8.1 ms against
    // 2.1 ms for its median, 5.8x the fastest).
    double fastest = INFINITY;
    for (const Timed& t : timed) fastest = std::min(fastest, t.once);
    for (Timed& t : timed)
      if (t.once > 4 * fastest) calibrate(t);
  }
  // A variant still more than 4x slower than the fastest calibration keeps its calibration as its one sample: its
  // rank is not in doubt, and timing it fully cost most of an exhaustive run.
  double fastest = INFINITY;
  for (const Timed& t : timed) fastest = std::min(fastest, t.once);
  std::vector<std::size_t> contenders;
  for (std::size_t j = 0; j < timed.size(); ++j) {
    if (timed[j].once > 4 * fastest)
      timed[j].samples.push_back(timed[j].once * 1e9);
    else
      contenders.push_back(j);
  }
  std::mt19937_64 shuffle(static_cast<std::uint64_t>(problem.m * 7919 + problem.n * 104729 + problem.k));
  // Interleaved rounds over `who`, on operands allocated afresh per round (seeds from `first_seed`).
  int done = 0, total = static_cast<int>(contenders.size()) * options_.samples;
  const auto measure_rounds = [&](std::vector<std::size_t> who, int rounds, unsigned first_seed) {
    for (int round = 0; round < rounds && !who.empty(); ++round) {
      const Operands ops(problem, first_seed + static_cast<unsigned>(round));
      std::shuffle(who.begin(), who.end(), shuffle);
      timed[who[0]].kernel.prepare(ops.args).run();  // the fresh operands into the caches
      for (std::size_t j : who) {
        Timed& t = timed[j];
        const PreparedGemm prepared = t.kernel.prepare(ops.args);
        const auto call = [&] { prepared.run(); };
        const double s =
            options_.cold_b ? cold_call_seconds(call, t.calls, ops.b_data(), ops.b_bytes()) : seconds(call, t.calls);
        t.samples.push_back(s / t.calls * 1e9);
        if (progress) progress(++done, total);
      }
    }
  };
  measure_rounds(contenders, options_.samples, 18u);
  // The near-best get more rounds (their medians are over all their samples), when there is a choice among them.
  if (options_.refine_samples > 0 && contenders.size() > 1) {
    double best_median = INFINITY;
    for (std::size_t j : contenders) best_median = std::min(best_median, median(timed[j].samples));
    std::vector<std::size_t> close;
    for (std::size_t j : contenders)
      if (median(timed[j].samples) <= best_median * (1.0 + options_.refine_within)) close.push_back(j);
    if (close.size() > 1) {
      total += static_cast<int>(close.size()) * options_.refine_samples;
      measure_rounds(close, options_.refine_samples, 18u + static_cast<unsigned>(options_.samples));
    }
  }
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
      const std::vector<double>& samples = timed[next_timed++].samples;
      m.median_ns = median(samples);
      std::vector<double> deviations;
      for (double x : samples) deviations.push_back(std::fabs(x - m.median_ns));
      m.spread = median(std::move(deviations)) / m.median_ns;
      if (records_)
        records_->add({m.spec_hash, family, problem.m, problem.n, problem.k, problem.batch,
                       problem.signature.to_json().dump(), c.config.to_json().dump(), target.str(), hardware_, threads,
                       m.median_ns, m.spread, static_cast<int>(samples.size()), TESSERA_VERSION, utc_now(),
                       options_.cold_b});
    }
    result.measured.push_back(m);
  }
  double best = INFINITY;
  for (std::size_t i = 0; i < result.measured.size(); ++i)
    if (result.measured[i].median_ns < best) {
      best = result.measured[i].median_ns;
      result.best = i;
    }
  return result;
}

}  // namespace tessera
