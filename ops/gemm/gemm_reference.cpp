#include "tessera/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "generator/core/expr_eval.hpp"
#include "ops/gemm/product_reference.hpp"

namespace tessera {

namespace {

double element(const Tensor& t, std::int64_t offset) {
  switch (t.dtype) {
    case DType::bf16:
      return from_bf16(static_cast<const std::uint16_t*>(t.data)[offset]);
    case DType::f16:
      return from_f16(static_cast<const std::uint16_t*>(t.data)[offset]);
    case DType::f32:
    case DType::tf32:  // stored as f32; the kernel's rounding to tf32 is in the tolerance
      return static_cast<const float*>(t.data)[offset];
    case DType::u8:
      return static_cast<const std::uint8_t*>(t.data)[offset];
    case DType::i8:
      return static_cast<const std::int8_t*>(t.data)[offset];
    default:
      throw InvalidArgument("reference", "supports f32, tf32, f16, bf16, u8 and i8 tensors");
  }
}

// Element (batch, row, col) of a 2-D or 3-D tensor; 2-D tensors are shared across batches.
double at(const Tensor& t, std::int64_t batch, std::int64_t row, std::int64_t col) {
  const std::size_t r = t.rank() - 2;
  std::int64_t offset = row * t.strides[r] + col * t.strides[r + 1];
  if (t.rank() == 3) offset += batch * t.strides[0];
  return element(t, offset);
}

// Element i of a 1-D vector, or of row `batch` of a 2-D [batch, length] one.
double at(const Tensor& t, std::int64_t batch, std::int64_t i) {
  std::int64_t offset = i * t.strides.back();
  if (t.rank() == 2) offset += batch * t.strides[0];
  return element(t, offset);
}

}  // namespace

GemmReference reference_from_products(const GemmArgs& g, const ProductRows& products) {
  GemmReference ref;
  const std::size_t rd = g.d.rank() - 2;
  ref.batch = g.d.rank() == 3 ? g.d.shape[0] : 1;
  ref.m = g.d.shape[rd];
  ref.n = g.d.shape[rd + 1];
  const std::int64_t m = ref.m, n = ref.n;
  const Epilogue& e = g.epilogue;
  const bool c_read = e.reads_c() && !(g.beta == 0 && e.c_scaled_by_beta());
  const double eps = std::ldexp(1.0, -24);
  // tf32 math rounds each input to 10 mantissa bits, so each product may be off by about 2^-10 of itself.
  const double product_eps = g.a.dtype == DType::tf32 || g.b.dtype == DType::tf32 ? std::ldexp(1.0, -10) : 0.0;
  // A 16-bit D rounds the result once more.
  const double output_eps = g.d.dtype == DType::f16    ? std::ldexp(1.0, -11)
                            : g.d.dtype == DType::bf16 ? std::ldexp(1.0, -8)
                                                       : 0.0;
  // 8-bit integer products are summed exactly (in i32, as here in double) and rounded once to f32 before the
  // epilogue: only the epilogue's arithmetic is inexact.
  const auto byte = [](DType t) { return t == DType::u8 || t == DType::i8; };
  const bool int8 = byte(g.a.dtype) && byte(g.b.dtype);
  ref.values.resize(static_cast<std::size_t>(ref.batch * m * n));
  ref.tolerance.resize(ref.values.size());
  ProductRow row;
  for (std::int64_t bi = 0; bi < ref.batch; ++bi)
    for (std::int64_t i = 0; i < m; ++i) {
      row.acc.assign(static_cast<std::size_t>(n), 0.0);
      row.magnitude.assign(static_cast<std::size_t>(n), 0.0);
      row.terms = 0;
      products(bi, i, row);
      const double summed_terms = int8 ? 0.0 : row.terms;
      for (std::int64_t j = 0; j < n; ++j) {
        double acc = row.acc[static_cast<std::size_t>(j)];
        const double magnitude = row.magnitude[static_cast<std::size_t>(j)];
        if (int8) acc = static_cast<float>(acc);
        double inputs_magnitude = 0;
        const double c = c_read ? at(g.c, bi, i, j) : 0.0;
        const double value = evaluate(e.tree(), [&](const ExprNode& leaf) -> double {
          if (leaf.op == ExprOp::Var) {
            if (leaf.name == "acc") return acc;
            if (leaf.name == "alpha") return g.alpha;
            if (leaf.name == "beta") return g.beta;
            return c;
          }
          const Tensor& t = g.inputs.at(leaf.name);
          const double x = leaf.args.size() == 2 ? at(t, bi, i, j) : at(t, bi, leaf.args[0]->name == "m" ? i : j);
          inputs_magnitude += std::fabs(x);
          return x;
        });
        const std::size_t idx = static_cast<std::size_t>((bi * m + i) * n + j);
        ref.values[idx] = value;
        const double scale = magnitude * std::max(1.0, std::fabs(double{g.alpha})) + std::fabs(double{g.beta} * c) +
                             std::fabs(c) + inputs_magnitude;
        ref.tolerance[idx] = (1e-5 + output_eps) * std::fabs(value) + 4 * eps * (summed_terms + 16) * scale +
                             product_eps * magnitude * std::max(1.0, std::fabs(double{g.alpha}));
      }
    }
  return ref;
}

GemmReference reference_gemm(const GemmArgs& g) {
  const std::size_t ra = g.a.rank() - 2, rb = g.b.rank() - 2, rd = g.d.rank() - 2;
  const std::int64_t m = g.a.shape[ra], k = g.a.shape[ra + 1], n = g.b.shape[rb + 1];
  if (g.d.shape[rd] != m || g.d.shape[rd + 1] != n) throw InvalidArgument("d", "shape does not match a·b");
  // Each matrix's A (by rows) and B (by columns) read once into doubles, so that the inner loop is a contiguous
  // dot product: read element by element through the strides, 512×4096×4096 took a minute to check.
  std::vector<double> a_rows(static_cast<std::size_t>(m * k)), b_cols(static_cast<std::size_t>(n * k));
  std::int64_t gathered = -1;
  return reference_from_products(g, [&](std::int64_t bi, std::int64_t i, ProductRow& out) {
    if (bi != gathered) {
      if (gathered < 0 || g.a.rank() == 3)
        for (std::int64_t r = 0; r < m; ++r)
          for (std::int64_t p = 0; p < k; ++p) a_rows[static_cast<std::size_t>(r * k + p)] = at(g.a, bi, r, p);
      if (gathered < 0 || g.b.rank() == 3)
        for (std::int64_t p = 0; p < k; ++p)
          for (std::int64_t j = 0; j < n; ++j) b_cols[static_cast<std::size_t>(j * k + p)] = at(g.b, bi, p, j);
      gathered = bi;
    }
    out.terms = static_cast<double>(k);
    const double* row = a_rows.data() + i * k;
    for (std::int64_t j = 0; j < n; ++j) {
      const double* col = b_cols.data() + j * k;
      // Four partial sums (in double, far below the tolerance of f32 kernels; exact for int8 products).
      double sums[4] = {}, magnitudes[4] = {};
      std::int64_t p = 0;
      for (; p + 4 <= k; p += 4)
        for (int u = 0; u < 4; ++u) {
          const double product = row[p + u] * col[p + u];
          sums[u] += product;
          magnitudes[u] += std::fabs(product);
        }
      for (; p < k; ++p) {
        const double product = row[p] * col[p];
        sums[0] += product;
        magnitudes[0] += std::fabs(product);
      }
      out.acc[static_cast<std::size_t>(j)] = (sums[0] + sums[1]) + (sums[2] + sums[3]);
      out.magnitude[static_cast<std::size_t>(j)] = (magnitudes[0] + magnitudes[1]) + (magnitudes[2] + magnitudes[3]);
    }
  });
}

Comparison compare_gemm(const GemmReference& ref, const Tensor& d, bool exact) {
  Comparison cmp;
  double max_ref = 0;
  for (double v : ref.values) max_ref = std::max(max_ref, std::fabs(v));
  for (std::int64_t bi = 0; bi < ref.batch; ++bi)
    for (std::int64_t i = 0; i < ref.m; ++i)
      for (std::int64_t j = 0; j < ref.n; ++j) {
        const std::size_t idx = static_cast<std::size_t>((bi * ref.m + i) * ref.n + j);
        const double got = at(d, bi, i, j), want = ref.values[idx];
        const double representable = d.dtype == DType::f16    ? from_f16(to_f16(static_cast<float>(want)))
                                     : d.dtype == DType::bf16 ? from_bf16(to_bf16(static_cast<float>(want)))
                                     : d.dtype == DType::u8   ? std::clamp(std::nearbyint(want), 0.0, 255.0)
                                     : d.dtype == DType::i8   ? std::clamp(std::nearbyint(want), -128.0, 127.0)
                                                              : static_cast<double>(static_cast<float>(want));
        // A NaN where the reference has one (alpha = NaN, 0·inf in an epilogue) is the right answer.
        const bool both_nan = std::isnan(got) && std::isnan(want);
        // An integer D (requantised) holds the reference rounded and saturated (its error is counted from that);
        // where the reference lies within its tolerance of a rounding boundary, either neighbour is right.
        const bool integer_d = d.dtype == DType::u8 || d.dtype == DType::i8;
        const double err = std::fabs(got - (integer_d ? representable : want));
        const bool good =
            both_nan || (integer_d ? (got == representable ||
                                      (std::fabs(got - representable) == 1 &&
                                       std::fabs(std::fabs(want - std::trunc(want)) - 0.5) <= ref.tolerance[idx]))
                         : exact   ? got == representable
                                   : (err <= ref.tolerance[idx] || (std::isinf(want) && got == want)));
        if (std::isfinite(err)) cmp.max_abs_err = std::max(cmp.max_abs_err, err);
        if (!good) {
          if (cmp.mismatches == 0)
            cmp.first_mismatch = fmt::format("d[{}, {}, {}] = {}, expected {} ± {:.3g}", bi, i, j, got, want,
                                             exact ? 0.0 : ref.tolerance[idx]);
          if (!std::isfinite(err)) cmp.max_abs_err = INFINITY;
          ++cmp.mismatches;
        }
      }
  cmp.max_rel_err = max_ref > 0 ? cmp.max_abs_err / max_ref : cmp.max_abs_err;
  return cmp;
}

}  // namespace tessera
