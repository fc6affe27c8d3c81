// The attention tuner: the variant space ranked by the analytic model (default_for first), the top k compiled and
// timed by the shared interleaved protocol on fresh operands.
#include <cmath>
#include <random>

#include "generator/attention/attention_json.hpp"
#include "generator/attention/cpu_attention_config.hpp"
#include "generator/attention/cpu_attention_spec.hpp"
#include "generator/core/arith.hpp"
#include "generator/core/dtype.hpp"
#include "generator/core/expr_bounds.hpp"
#include "generator/cost/attention_cost.hpp"
#include "generator/cost/cost_model.hpp"
#include "ops/tuning/ranked_measurement.hpp"

namespace tessera {

namespace {

// Owned operands describing exactly the problem's signature: dense BHSD views (varlen: packed [total, heads, d]) whose
// head dimension has the signature's stride class, the LSE when it is written, and the modifier's tensors sized to
// every index its reads can reach.
struct AttentionOperands {
  std::vector<float> q, k, v, o, lse;
  std::map<std::string, std::vector<float>> tensors;
  AttentionArgs args;

  AttentionOperands(const AttentionProblem& p, unsigned seed) {
    const AttentionSignature& s = p.signature;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const bool varlen = p.varlen();
    std::int64_t total_q = 0, total_kv = 0;
    for (std::int64_t b = 0; b < p.batch; ++b) total_q += p.q_len(b), total_kv += p.kv_len(b);
    const auto make = [&](std::vector<float>& data, std::int64_t heads, std::int64_t seq, std::int64_t dim, bool unit_d,
                          bool fill) {
      const std::int64_t ds = unit_d ? 1 : 2;
      const std::int64_t rows = varlen ? seq : p.batch * seq;
      data.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, rows * heads * dim * ds)));
      // A bf16 signature's tensors hold bf16 elements (in the first half of the floats' bytes).
      const bool bf16 = s.dtype == DType::bf16;
      auto* halves = reinterpret_cast<std::uint16_t*>(data.data());
      if (fill) {
        for (std::size_t i = 0; i < data.size(); ++i) {
          if (bf16)
            halves[i] = to_bf16(dist(rng));
          else
            data[i] = dist(rng);
        }
      }
      Tensor t{data.data(), s.dtype, {}, {}};
      if (varlen) {
        t.shape = {seq, heads, dim};
        t.strides = {heads * dim * ds, dim * ds, ds};
      } else {
        t.shape = {p.batch, heads, seq, dim};
        t.strides = {heads * seq * dim * ds, seq * dim * ds, dim * ds, ds};
      }
      return t;
    };
    args.q = make(q, p.heads, varlen ? total_q : p.seq_q, s.head_dim_qk, s.q_unit_d, true);
    args.k = make(k, p.kv_heads, varlen ? total_kv : p.seq_kv, s.head_dim_qk, s.k_unit_d, true);
    args.v = make(v, p.kv_heads, varlen ? total_kv : p.seq_kv, s.head_dim_v, s.v_unit_d, true);
    args.o = make(o, p.heads, varlen ? total_q : p.seq_q, s.head_dim_v, s.o_unit_d, false);
    if (varlen) {
      args.seq_offsets_q = {0}, args.seq_offsets_kv = {0};
      for (std::int64_t b = 0; b < p.batch; ++b) {
        args.seq_offsets_q.push_back(args.seq_offsets_q.back() + p.q_len(b));
        args.seq_offsets_kv.push_back(args.seq_offsets_kv.back() + p.kv_len(b));
      }
    }
    if (s.lse) {
      lse.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, p.heads * (varlen ? total_q : p.batch * p.seq_q))));
      args.lse.data = lse.data();
      args.lse.shape =
          varlen ? std::vector<std::int64_t>{p.heads, total_q} : std::vector<std::int64_t>{p.batch, p.heads, p.seq_q};
      args.lse.strides =
          varlen ? std::vector<std::int64_t>{total_q, 1} : std::vector<std::int64_t>{p.heads * p.seq_q, p.seq_q, 1};
    }
    args.causal = s.causal;
    args.score_mod = s.score_mod;
    for (const std::string& name : s.score_mod.scalars()) args.scalars[name] = 1.0f;
    // Each modifier tensor as large as its reads reach over every position of the problem.
    const auto range = [&](const std::string& name) -> Interval {
      const std::int64_t n = name == "i" ? p.seq_q : name == "j" ? p.seq_kv : name == "h" ? p.heads : p.batch;
      return {0, static_cast<double>(std::max<std::int64_t>(1, n) - 1)};
    };
    for (const auto& use : s.score_mod.tensors()) {
      std::vector<std::int64_t> shape(use.rank, 1);
      visit(s.score_mod.tree(), [&](const ExprNode& node) {
        if (node.op != ExprOp::Read || node.name != use.name) return;
        for (std::size_t d = 0; d < node.args.size(); ++d) {
          const Interval bounds = int_bounds(node.args[d], range);
          if (bounds.lo < 0 || !std::isfinite(bounds.hi) || bounds.hi >= double(1LL << 30))
            throw InvalidArgument("score_mod", "cannot size tensor '" + use.name + "' for tuning: index '" +
                                                   to_string(node.args[d]) + "' is not bounded within [0, 2^30)");
          shape[d] = std::max(shape[d], static_cast<std::int64_t>(bounds.hi) + 1);
        }
      });
      std::vector<float>& data = tensors[use.name];
      std::int64_t count = 1;
      for (std::int64_t e : shape) count *= e;
      data.resize(static_cast<std::size_t>(count));
      for (float& x : data) x = dist(rng);
      Tensor t{data.data(), DType::f32, shape, std::vector<std::int64_t>(shape.size(), 1)};
      for (std::size_t d = shape.size() - 1; d-- > 0;) t.strides[d] = t.strides[d + 1] * shape[d + 1];
      args.tensors[use.name] = t;
    }
  }
};

}  // namespace

namespace {

// The configs of `space` ranked by `scores` (default first), the top k (or all) timed as the attention tuner times.
AttentionTuneResult time_attention(Runtime& runtime, const AttentionProblem& problem,
                                   const std::vector<CpuAttentionConfig>& space, const std::vector<double>& scores,
                                   const TuneOptions& options, MeasurementStore* records, const std::string& family,
                                   const std::function<void(int, int)>& progress) {
  const CpuTarget& target = runtime.target();
  MeasurementLog log(records, {.op = "attention",
                               .problem = record_problem(problem),
                               .family = family,
                               .signature = to_json(problem.signature).dump(),
                               .target = target.str(),
                               .threads = runtime.threads()});
  const auto make_round = [&](const std::vector<AttentionKernel>& kernels, unsigned seed) {
    auto ops = std::make_shared<const AttentionOperands>(problem, seed);
    TimingRound round;
    round.operands = ops;
    round.prepare = [&kernels, ops](std::size_t i) -> std::function<void()> {
      return [&kernel = kernels[i], ops] { kernel.run(ops->args); };
    };
    return round;
  };
  AttentionTuneResult result;
  static_cast<VariantTuneResult<CpuAttentionConfig>&>(result) = measure_ranked<CpuAttentionConfig, AttentionKernel>(
      space, scores, options, log,
      [&](const CpuAttentionConfig& c) {
        return CpuAttentionSpec{problem.signature, c, target};
      },
      [&](const CpuAttentionConfig& c) { return runtime.compile(problem, c); }, make_round,
      [&](const CpuAttentionConfig& c) { return attention_cycles(problem, c, target); },
      static_cast<std::uint64_t>(problem.seq_q * 7919 + problem.seq_kv * 104729 + problem.signature.head_dim_qk),
      progress);
  result.problem = problem;
  return result;
}

}  // namespace

AttentionTuneResult tune_attention(Runtime& runtime, const AttentionProblem& problem, const TuneOptions& options,
                                   MeasurementStore* records, const std::string& family,
                                   const std::function<void(int, int)>& progress) {
  const std::vector<CpuAttentionConfig> space = cpu_attention_variants(problem, runtime.target());
  return time_attention(runtime, problem, space, attention_scores(problem, space, runtime.target()), options, records,
                        family, progress);
}

AttentionTuneResult measure_attention(Runtime& runtime, const AttentionProblem& problem,
                                      const std::vector<CpuAttentionConfig>& configs, TuneOptions options,
                                      MeasurementStore* records, const std::string& family) {
  options.exhaustive = true;
  std::vector<double> in_order(configs.size());
  for (std::size_t i = 0; i < configs.size(); ++i) in_order[i] = static_cast<double>(i);
  return time_attention(runtime, problem, configs, in_order, options, records, family, {});
}

}  // namespace tessera
