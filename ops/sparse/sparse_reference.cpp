#include <fmt/format.h>

#include <cmath>

#include "generator/core/expr_eval.hpp"
#include "generator/core/sparse_format.hpp"
#include "ops/gemm/product_reference.hpp"
#include "tessera/reference.hpp"

namespace tessera {

namespace {

double tensor_at(const Tensor& t, std::int64_t row, std::int64_t col) {
  const std::size_t r = t.rank() - 2;
  const std::int64_t offset = row * t.strides[r] + col * t.strides[r + 1];
  if (t.dtype == DType::f32) return static_cast<const float*>(t.data)[offset];
  const std::uint16_t h = static_cast<const std::uint16_t*>(t.data)[offset];
  return t.dtype == DType::bf16 ? from_bf16(h) : from_f16(h);
}

double vector_at(const Tensor& t, std::int64_t i) { return static_cast<const float*>(t.data)[i * t.strides.back()]; }

}  // namespace

std::vector<float> densify(const SparseMatrix& m) {
  std::vector<float> dense(static_cast<std::size_t>(m.rows * m.cols), 0.0f);
  const std::int64_t per_block = std::int64_t{m.block_rows} * m.block_cols;
  for (std::int64_t br = 0; br < m.block_row_count(); ++br)
    for (std::int64_t p = sparse_index_at(m.row_offsets, m.index_bits, br);
         p < sparse_index_at(m.row_offsets, m.index_bits, br + 1); ++p) {
      const std::int64_t bc = sparse_index_at(m.col_indices, m.index_bits, p);
      for (int r = 0; r < m.block_rows; ++r)
        for (int c = 0; c < m.block_cols; ++c) {
          const std::int64_t i = br * m.block_rows + r, j = bc * m.block_cols + c;
          if (i < m.rows && j < m.cols)
            dense[static_cast<std::size_t>(i * m.cols + j)] =
                static_cast<float>(sparse_value_at(m.values, m.value, p * per_block + r * m.block_cols + c));
        }
    }
  return dense;
}

GemmReference reference_spmm(const SpmmArgs& args) {
  const SparseMatrix& m = args.a;
  GemmArgs g;
  g.a = Tensor::matrix(nullptr, m.rows, m.cols);  // its dtype (f32: stored values are exact in double) and shape only
  g.b = args.b;
  g.c = args.c;
  g.d = args.d;
  g.alpha = args.alpha;
  g.beta = args.beta;
  g.epilogue = args.epilogue;
  g.inputs = args.inputs;
  const std::size_t rb = g.b.rank() - 2, rd = g.d.rank() - 2;
  const std::int64_t n = g.b.shape[rb + 1];
  if (g.b.shape[rb] != m.cols) throw InvalidArgument("b", "has not as many rows as a has columns");
  if (g.d.shape[rd] != m.rows || g.d.shape[rd + 1] != n) throw InvalidArgument("d", "shape does not match a·b");
  // B read once into doubles by rows; each row of A adds the B rows its stored entries name (a stored zero too: it
  // multiplies an inf or NaN of B as the kernel does), and only those: a B row no entry names is never read.
  std::vector<double> b_rows(static_cast<std::size_t>(m.cols * n));
  for (std::int64_t p = 0; p < m.cols; ++p)
    for (std::int64_t j = 0; j < n; ++j) b_rows[static_cast<std::size_t>(p * n + j)] = tensor_at(g.b, p, j);
  const std::int64_t per_block = std::int64_t{m.block_rows} * m.block_cols;
  return reference_from_products(g, [&](std::int64_t, std::int64_t i, ProductRow& out) {
    const std::int64_t br = i / m.block_rows, r = i % m.block_rows;
    for (std::int64_t p = sparse_index_at(m.row_offsets, m.index_bits, br);
         p < sparse_index_at(m.row_offsets, m.index_bits, br + 1); ++p) {
      const std::int64_t bc = sparse_index_at(m.col_indices, m.index_bits, p);
      for (int c = 0; c < m.block_cols; ++c) {
        const std::int64_t col = bc * m.block_cols + c;
        if (col >= m.cols) break;  // a partial edge block's columns past the matrix are cut
        const double a = sparse_value_at(m.values, m.value, p * per_block + r * m.block_cols + c);
        const double* b = b_rows.data() + col * n;
        for (std::int64_t j = 0; j < n; ++j) {
          const double product = a * b[j];
          out.acc[static_cast<std::size_t>(j)] += product;
          out.magnitude[static_cast<std::size_t>(j)] += std::fabs(product);
        }
        ++out.terms;
      }
    }
  });
}

SddmmReference reference_sddmm(const SddmmArgs& g) {
  const SparseMatrix& m = g.pattern;
  SddmmReference ref;
  ref.values.resize(static_cast<std::size_t>(m.entries));
  ref.tolerance.resize(ref.values.size());
  const std::int64_t k = g.a.shape.back();
  const double eps = std::ldexp(1.0, -24);
  for (std::int64_t i = 0; i < m.rows; ++i)
    for (std::int64_t p = sparse_index_at(m.row_offsets, m.index_bits, i);
         p < sparse_index_at(m.row_offsets, m.index_bits, i + 1); ++p) {
      const std::int64_t j = sparse_index_at(m.col_indices, m.index_bits, p);
      double acc = 0, magnitude = 0;
      for (std::int64_t q = 0; q < k; ++q) {
        const double product = tensor_at(g.a, i, q) * tensor_at(g.b, j, q);
        acc += product;
        magnitude += std::fabs(product);
      }
      double inputs_magnitude = 0;
      const double s = g.epilogue.reads_s() ? sparse_value_at(m.values, m.value, p) : 0.0;
      const double value = evaluate(g.epilogue.tree(), [&](const ExprNode& leaf) -> double {
        if (leaf.op == ExprOp::Var) {
          if (leaf.name == "acc") return acc;
          if (leaf.name == "alpha") return g.alpha;
          return s;
        }
        const double x = vector_at(g.inputs.at(leaf.name), leaf.args[0]->name == "m" ? i : j);
        inputs_magnitude += std::fabs(x);
        return x;
      });
      const auto idx = static_cast<std::size_t>(p);
      ref.values[idx] = value;
      ref.tolerance[idx] = 1e-5 * std::fabs(value) + 4 * eps * static_cast<double>(k + 16) *
                                                         (magnitude * std::max(1.0, std::fabs(double{g.alpha})) +
                                                          std::fabs(s) + inputs_magnitude);
    }
  return ref;
}

Comparison compare_sddmm(const SddmmReference& ref, const Tensor& out) {
  Comparison cmp;
  double max_ref = 0;
  for (double v : ref.values) max_ref = std::max(max_ref, std::fabs(v));
  const auto* got_values = static_cast<const float*>(out.data);
  for (std::size_t p = 0; p < ref.values.size(); ++p) {
    const double got = got_values[static_cast<std::int64_t>(p) * (out.strides.empty() ? 1 : out.strides[0])];
    const double want = ref.values[p], err = std::fabs(got - want);
    const bool good =
        (std::isnan(got) && std::isnan(want)) || err <= ref.tolerance[p] || (std::isinf(want) && got == want);
    if (std::isfinite(err)) cmp.max_abs_err = std::max(cmp.max_abs_err, err);
    if (!good) {
      if (cmp.mismatches == 0)
        cmp.first_mismatch = fmt::format("out[{}] = {}, expected {} ± {:.3g}", p, got, want, ref.tolerance[p]);
      if (!std::isfinite(err)) cmp.max_abs_err = INFINITY;
      ++cmp.mismatches;
    }
  }
  cmp.max_rel_err = max_ref > 0 ? cmp.max_abs_err / max_ref : cmp.max_abs_err;
  return cmp;
}

}  // namespace tessera
