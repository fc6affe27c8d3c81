// SparseMatrixData: CSR and BSR arrays built from coordinates, in any index width and value type.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "generator/core/error.hpp"
#include "generator/core/sparse_format.hpp"
#include "tessera/sparse.hpp"

namespace tessera {

namespace {

template <class T>
void put(std::vector<std::byte>& bytes, std::size_t i, T value) {
  std::memcpy(bytes.data() + i * sizeof(T), &value, sizeof(T));
}

void put_index(std::vector<std::byte>& bytes, int bits, std::size_t i, std::int64_t value) {
  if (bits == 32)
    put(bytes, i, static_cast<std::int32_t>(value));
  else
    put(bytes, i, value);
}

void put_value(std::vector<std::byte>& bytes, DType dtype, std::size_t i, double value) {
  const auto f = static_cast<float>(value);
  if (dtype == DType::f32)
    put(bytes, i, f);
  else
    put(bytes, i, dtype == DType::bf16 ? to_bf16(f) : to_f16(f));
}

void check_coo(const CooMatrix& coo) {
  if (coo.rows < 0 || coo.cols < 0)
    throw InvalidArgument("matrix", fmt::format("has a negative shape {}x{}", coo.rows, coo.cols));
  if (coo.row.size() != coo.col.size() || coo.row.size() != coo.value.size())
    throw InvalidArgument("matrix", "row, col and value lists differ in length");
  for (std::size_t e = 0; e < coo.row.size(); ++e)
    if (coo.row[e] < 0 || coo.row[e] >= coo.rows || coo.col[e] < 0 || coo.col[e] >= coo.cols)
      throw InvalidArgument("matrix", fmt::format("entry {} at ({}, {}) lies outside the {}x{} matrix", e, coo.row[e],
                                                  coo.col[e], coo.rows, coo.cols));
}

}  // namespace

SparseMatrixData SparseMatrixData::csr(const CooMatrix& coo, int index_bits, DType value) {
  return bsr(coo, 1, 1, index_bits, value);
}

SparseMatrixData SparseMatrixData::bsr(const CooMatrix& coo, int block_rows, int block_cols, int index_bits,
                                       DType value) {
  check_coo(coo);
  SparseMatrixData m;
  SparseMatrix& s = m.shape_;
  s.format = block_rows == 1 && block_cols == 1 ? SparseFormat::Csr : SparseFormat::Bsr;
  s.rows = coo.rows;
  s.cols = coo.cols;
  s.block_rows = block_rows;
  s.block_cols = block_cols;
  s.index_bits = index_bits;
  s.value = value;
  s.signature().check();
  if (index_bits == 32 && (s.block_col_count() > INT32_MAX || static_cast<std::int64_t>(coo.row.size()) > INT32_MAX))
    throw InvalidArgument("matrix", "too large for 32-bit indices");

  // Entries in (block row, block column) order; equal blocks become one.
  std::vector<std::size_t> order(coo.row.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  const auto block = [&](std::size_t e) { return std::pair{coo.row[e] / block_rows, coo.col[e] / block_cols}; };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return block(x) < block(y); });
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(s.block_row_count()) + 1, 0), indices;
  std::vector<std::size_t> first_of_block;  // per stored block: its first entry in `order`
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (i > 0 && block(order[i]) == block(order[i - 1])) continue;
    first_of_block.push_back(i);
    indices.push_back(block(order[i]).second);
    ++offsets[static_cast<std::size_t>(block(order[i]).first) + 1];
  }
  std::partial_sum(offsets.begin(), offsets.end(), offsets.begin());
  s.entries = static_cast<std::int64_t>(indices.size());

  const std::size_t per_block = static_cast<std::size_t>(block_rows) * static_cast<std::size_t>(block_cols);
  const int value_bytes = dtype_bytes(value);
  m.offsets_.resize(offsets.size() * static_cast<std::size_t>(index_bits / 8));
  m.indices_.resize(indices.size() * static_cast<std::size_t>(index_bits / 8));
  for (std::size_t i = 0; i < offsets.size(); ++i) put_index(m.offsets_, index_bits, i, offsets[i]);
  for (std::size_t i = 0; i < indices.size(); ++i) put_index(m.indices_, index_bits, i, indices[i]);
  // Values summed in double (duplicates add up), then rounded once.
  std::vector<double> sums(indices.size() * per_block, 0.0);
  for (std::size_t b = 0; b < first_of_block.size(); ++b) {
    const std::size_t end = b + 1 < first_of_block.size() ? first_of_block[b + 1] : order.size();
    for (std::size_t i = first_of_block[b]; i < end; ++i) {
      const std::size_t e = order[i];
      const auto r = static_cast<std::size_t>(coo.row[e] % block_rows),
                 c = static_cast<std::size_t>(coo.col[e] % block_cols);
      sums[b * per_block + r * static_cast<std::size_t>(block_cols) + c] += coo.value[e];
    }
  }
  m.values_.resize(sums.size() * static_cast<std::size_t>(value_bytes));
  for (std::size_t i = 0; i < sums.size(); ++i) put_value(m.values_, value, i, sums[i]);
  return m;
}

SparseMatrixData SparseMatrixData::column_panel(const SparseMatrix& m, std::int64_t first, std::int64_t end) {
  SparseMatrixData panel;
  panel.shape_ = m;
  panel.shape_.row_offsets = panel.shape_.col_indices = panel.shape_.values = nullptr;
  const auto index_bytes = static_cast<std::size_t>(m.index_bits / 8);
  const auto block_bytes =
      static_cast<std::size_t>(m.block_rows) * static_cast<std::size_t>(m.block_cols) * dtype_bytes(m.value);
  const std::int64_t rows = m.block_row_count();
  panel.offsets_.resize(static_cast<std::size_t>(rows + 1) * index_bytes);
  std::int64_t kept = 0;
  put_index(panel.offsets_, m.index_bits, 0, 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t p = sparse_index_at(m.row_offsets, m.index_bits, r);
         p < sparse_index_at(m.row_offsets, m.index_bits, r + 1); ++p) {
      const std::int64_t c = sparse_index_at(m.col_indices, m.index_bits, p);
      if (c < first || c >= end) continue;
      panel.indices_.resize(panel.indices_.size() + index_bytes);
      put_index(panel.indices_, m.index_bits, static_cast<std::size_t>(kept), c);
      const auto* value = static_cast<const std::byte*>(m.values) + static_cast<std::size_t>(p) * block_bytes;
      panel.values_.insert(panel.values_.end(), value, value + block_bytes);
      ++kept;
    }
    put_index(panel.offsets_, m.index_bits, static_cast<std::size_t>(r + 1), kept);
  }
  panel.shape_.entries = kept;
  return panel;
}

SparseMatrix SparseMatrixData::view() const {
  SparseMatrix v = shape_;
  v.row_offsets = offsets_.data();
  v.col_indices = indices_.data();
  v.values = values_.data();
  return v;
}

CooMatrix SparseMatrixData::coo() const { return coo(view()); }

CooMatrix SparseMatrixData::coo(const SparseMatrix& v) {
  CooMatrix out;
  out.rows = v.rows;
  out.cols = v.cols;
  const std::int64_t per_block = std::int64_t{v.block_rows} * v.block_cols;
  for (std::int64_t br = 0; br < v.block_row_count(); ++br)
    for (std::int64_t p = sparse_index_at(v.row_offsets, v.index_bits, br);
         p < sparse_index_at(v.row_offsets, v.index_bits, br + 1); ++p) {
      const std::int64_t bc = sparse_index_at(v.col_indices, v.index_bits, p);
      for (int r = 0; r < v.block_rows; ++r)
        for (int c = 0; c < v.block_cols; ++c) {
          const std::int64_t i = br * v.block_rows + r, j = bc * v.block_cols + c;
          if (i >= v.rows || j >= v.cols) continue;
          out.row.push_back(i);
          out.col.push_back(j);
          out.value.push_back(sparse_value_at(v.values, v.value, p * per_block + r * v.block_cols + c));
        }
    }
  return out;
}

}  // namespace tessera
