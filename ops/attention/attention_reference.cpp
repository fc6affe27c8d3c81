#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "generator/core/expr_eval.hpp"
#include "tessera/reference.hpp"

namespace tessera {

namespace {

double at(const Tensor& t, std::initializer_list<std::int64_t> index) {
  std::int64_t offset = 0;
  std::size_t d = 0;
  for (std::int64_t x : index) offset += x * t.strides[d++];
  if (t.dtype == DType::bf16) return from_bf16(static_cast<const std::uint16_t*>(t.data)[offset]);
  if (t.dtype == DType::f16) return from_f16(static_cast<const std::uint16_t*>(t.data)[offset]);
  return static_cast<const float*>(t.data)[offset];
}

// Where a query or key row of batch item b lies: its first row in the sequence dimension and its length.
struct Rows {
  std::int64_t first, count;
};

constexpr double kF32Epsilon = 1.0 / (1 << 23);

}  // namespace

AttentionReference reference_attention(const AttentionArgs& args) {
  const AttentionProblem p = describe_attention(args);  // validates
  const bool varlen = p.varlen();
  const std::int64_t dqk = p.signature.head_dim_qk, dv = p.signature.head_dim_v;
  const double scale = args.scale ? *args.scale : 1.0 / std::sqrt(static_cast<double>(dqk));
  // A head's rows gathered once into doubles (keys and values once a query head, a query row once a row): the
  // reference reads every Q·K element Sq·Skv times, and reading through the tensors' strides and dtypes each time
  // made it most of the suite's time under the sanitizers.
  const auto gather = [&](const Tensor& t, std::int64_t b, std::int64_t h, Rows rows, std::int64_t width,
                          std::vector<double>& out) {
    out.resize(static_cast<std::size_t>(rows.count * width));
    for (std::int64_t r = 0; r < rows.count; ++r)
      for (std::int64_t d = 0; d < width; ++d)
        out[static_cast<std::size_t>(r * width + d)] =
            varlen ? at(t, {rows.first + r, h, d}) : at(t, {b, h, rows.first + r, d});
  };
  const ScoreModifier& mod = args.score_mod;
  AttentionReference ref;
  std::vector<double> q_row, keys, values, scores, o;
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const auto bi = static_cast<std::size_t>(b);
    const Rows q_rows{varlen ? args.seq_offsets_q[bi] : 0, p.q_len(b)};
    const Rows kv_rows{varlen ? args.seq_offsets_kv[bi] : 0, p.kv_len(b)};
    for (std::int64_t h = 0; h < p.heads; ++h) {
      const std::int64_t g = h / (p.heads / p.kv_heads);
      gather(args.k, b, g, kv_rows, dqk, keys);
      gather(args.v, b, g, kv_rows, dv, values);
      double v_max = 0;
      for (double v : values) v_max = std::max(v_max, std::fabs(v));
      for (std::int64_t i = 0; i < q_rows.count; ++i) {
        gather(args.q, b, h, Rows{q_rows.first + i, 1}, dqk, q_row);
        scores.assign(static_cast<std::size_t>(kv_rows.count), -INFINITY);
        double magnitude = 0;  // the largest Σ|q·k|·scale: what rounding in an f32 dot product scales with
        const std::int64_t visible = visible_keys(p.signature.causal, i, q_rows.count, kv_rows.count);
        for (std::int64_t j = 0; j < visible; ++j) {
          const double* key = keys.data() + j * dqk;
          double dot = 0, abs_dot = 0;
          for (std::int64_t d = 0; d < dqk; ++d) {
            const double x = q_row[static_cast<std::size_t>(d)] * key[d];
            dot += x;
            abs_dot += std::fabs(x);
          }
          double s = dot * scale;
          magnitude = std::max(magnitude, abs_dot * std::fabs(scale));
          if (!mod.is_identity())
            s = evaluate(mod.tree(), [&](const ExprNode& leaf) -> double {
              if (leaf.op == ExprOp::Var) {
                if (leaf.name == "s") return s;
                if (leaf.name == "i") return static_cast<double>(i);
                if (leaf.name == "j") return static_cast<double>(j);
                if (leaf.name == "h") return static_cast<double>(h);
                if (leaf.name == "b") return static_cast<double>(b);
                return args.scalars.at(leaf.name);
              }
              const Tensor& t = args.tensors.at(leaf.name);
              std::int64_t offset = 0;
              for (std::size_t k = 0; k < leaf.args.size(); ++k) {
                const auto index = static_cast<std::int64_t>(evaluate(leaf.args[k], [&](const ExprNode& n) -> double {
                  return n.name == "i"   ? static_cast<double>(i)
                         : n.name == "j" ? static_cast<double>(j)
                         : n.name == "h" ? static_cast<double>(h)
                                         : static_cast<double>(b);
                }));
                if (index < 0 || index >= t.shape[k])
                  throw InvalidArgument("tensors[" + leaf.name + "]",
                                        fmt::format("index {} of dimension {} is outside [0, {}) at i = {}, j = {}",
                                                    index, k, t.shape[k], i, j));
                offset += index * t.strides[k];
              }
              return static_cast<const float*>(t.data)[offset];
            });
          if (std::isfinite(s)) magnitude = std::max(magnitude, std::fabs(s));
          scores[static_cast<std::size_t>(j)] = s;
        }
        double max = -INFINITY;
        for (double s : scores) max = std::max(max, s);
        double sum = 0;
        for (double& s : scores) {
          s = std::isinf(s) && s < 0 ? 0 : std::exp(s - max);
          sum += s;
        }
        o.assign(static_cast<std::size_t>(dv), 0.0);
        for (std::int64_t j = 0; j < kv_rows.count; ++j) {
          const double weight = scores[static_cast<std::size_t>(j)];
          const double* value = values.data() + j * dv;
          for (std::int64_t d = 0; d < dv; ++d) o[static_cast<std::size_t>(d)] += weight * value[d];
        }
        for (double x : o) ref.o.push_back(sum > 0 ? x / sum : 0.0);
        ref.lse.push_back(sum > 0 ? max + std::log(sum) : -INFINITY);
        // An f32 score is off by about ε·magnitude (times a few for the sums and the modifier's math), and exp turns
        // that into the same relative error of each weight; the rest is f32 rounding of the weighted sum.
        const double score_error = 8 * kF32Epsilon * (magnitude + 1) * std::sqrt(static_cast<double>(dqk) + 1);
        ref.tolerance.push_back(v_max * (score_error + 1e-5) + 1e-6);
        ref.v_max.push_back(v_max);
        ref.lse_tolerance.push_back(score_error + 1e-5 * (1 + std::fabs(ref.lse.back())));
      }
    }
  }
  return ref;
}

Comparison compare_attention(const AttentionReference& ref, const AttentionArgs& args, double weight_rounding) {
  const AttentionProblem p = describe_attention(args);
  const bool varlen = p.varlen();
  const std::int64_t dv = p.signature.head_dim_v;
  Comparison c;
  double ref_max = 0, err_max = 0;
  std::size_t row = 0;
  // `where` names the element, called only for the first mismatch (formatting every element's name was most of a
  // large comparison's time).
  const auto check = [&](const auto& where, double got, double want, double tol) {
    // −inf (a row that sees no key) and NaN (a NaN input) are right where the reference has them too.
    const bool same_special =
        (std::isinf(want) && want < 0 && std::isinf(got) && got < 0) || (std::isnan(want) && std::isnan(got));
    const double err = same_special ? 0 : std::fabs(got - want);
    if (std::isfinite(want)) ref_max = std::max(ref_max, std::fabs(want));
    if (!(err <= tol)) {  // NaN fails
      if (c.mismatches++ == 0) c.first_mismatch = fmt::format("{} = {}, expected {} ± {:.3g}", where(), got, want, tol);
    }
    if (std::isfinite(err)) err_max = std::max(err_max, err);
  };
  for (std::int64_t b = 0; b < p.batch; ++b) {
    const auto bi = static_cast<std::size_t>(b);
    const std::int64_t first = varlen ? args.seq_offsets_q[bi] : 0;
    for (std::int64_t h = 0; h < p.heads; ++h)
      for (std::int64_t i = 0; i < p.q_len(b); ++i, ++row) {
        for (std::int64_t d = 0; d < dv; ++d) {
          const double got = varlen ? at(args.o, {first + i, h, d}) : at(args.o, {b, h, i, d});
          const double want = ref.o[row * static_cast<std::size_t>(dv) + static_cast<std::size_t>(d)];
          // A 16-bit O rounded to nearest: at most half an ulp, 2^-8 (bf16) or 2^-11 (f16) of the value (truncation
          // would be twice that); weights rounded before P·V move O by up to their rounding times max |V|.
          const double rounding = (args.o.dtype == DType::bf16  ? std::fabs(want) / 256
                                   : args.o.dtype == DType::f16 ? std::fabs(want) / 2048
                                                                : 0.0) +
                                  2 * weight_rounding * ref.v_max[row];
          check(
              [&] {
                return varlen ? fmt::format("o[{}, {}, {}]", first + i, h, d)
                              : fmt::format("o[{}, {}, {}, {}]", b, h, i, d);
              },
              got, want, ref.tolerance[row] + rounding);
        }
        if (!args.lse.empty()) {
          const double got = varlen ? at(args.lse, {h, first + i}) : at(args.lse, {b, h, i});
          check(
              [&] {
                return varlen ? fmt::format("lse[{}, {}]", h, first + i) : fmt::format("lse[{}, {}, {}]", b, h, i);
              },
              got, ref.lse[row], ref.lse_tolerance[row]);
        }
      }
  }
  c.max_abs_err = err_max;
  c.max_rel_err = ref_max > 0 ? err_max / ref_max : err_max;
  return c;
}

}  // namespace tessera
