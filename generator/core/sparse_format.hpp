// A sparse operand as generated code sees it: its storage format, block shape, index and value types. Sizes, the
// number of non-zeros and the pattern itself are runtime data (and, through an inspector's statistics, cost-model
// features), not part of the code. CSR stores row offsets (rows + 1), column indices and values per non-zero; BSR
// the same per block_rows × block_cols block, each block's values row-major.
#pragma once

#include <cstdint>
#include <string>

#include "generator/core/dtype.hpp"

namespace tessera {

enum class SparseFormat : unsigned char { Csr, Bsr };

struct SparseSignature {
  SparseFormat format = SparseFormat::Csr;
  int block_rows = 1, block_cols = 1;  // 1×1 for CSR
  int index_bits = 32;                 // 32 or 64, for row offsets and column indices alike
  DType value = DType::f32;            // f32, bf16 or f16

  // Throws InvalidArgument naming the field and the rule.
  void check() const;
  // "csr_i32_f32", "bsr4x4_i64_bf16": a symbol-safe tag for kernel names.
  std::string tag() const;
  friend bool operator==(const SparseSignature&, const SparseSignature&) = default;
};

// Entry i of an index array of index_bits (32 or 64) bits, and of a value array of dtype, widened: for the host
// code (inspector, reference, checks) that reads patterns of either width.
inline std::int64_t sparse_index_at(const void* indices, int index_bits, std::int64_t i) {
  return index_bits == 32 ? static_cast<const std::int32_t*>(indices)[i] : static_cast<const std::int64_t*>(indices)[i];
}
inline double sparse_value_at(const void* values, DType dtype, std::int64_t i) {
  if (dtype == DType::f32) return static_cast<const float*>(values)[i];
  const std::uint16_t h = static_cast<const std::uint16_t*>(values)[i];
  return dtype == DType::bf16 ? from_bf16(h) : from_f16(h);
}

}  // namespace tessera
