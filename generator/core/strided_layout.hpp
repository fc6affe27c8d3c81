// The layout of a tensor of any rank as generated code sees it: per dimension, outermost first, whether its stride
// is 1 (contiguous: vector accesses run along it), 0 (broadcast: one element serves the whole dimension) or a
// runtime value. Attention's Q, K, V and O are rank-4 [batch, heads, seq, dim] views: BSHD and BHSD memory are two
// sets of strides of the same shape, and both are read in place. A matrix's Layout is the rank-2 case.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "generator/core/expr.hpp"
#include "generator/core/layout.hpp"

namespace tessera {

enum class StrideClass : unsigned char { Runtime, Unit, Broadcast };

class StridedLayout {
 public:
  StridedLayout() = default;
  explicit StridedLayout(std::vector<StrideClass> dims) : dims_(std::move(dims)) {}
  // The classes of a view's runtime strides: 0 is a broadcast, 1 on the innermost dimension that has it is the unit
  // stride (vector accesses run along one dimension only), anything else a runtime value.
  static StridedLayout of(std::span<const std::int64_t> strides);
  // Every dimension contiguous in order (row-major): runtime strides, the last one 1.
  static StridedLayout dense(std::size_t rank);
  // A matrix layout as its two dimensions [rows, cols] (Zero has no strided form: it reads no memory).
  static StridedLayout of_matrix(const Layout& layout);

  std::size_t rank() const { return dims_.size(); }
  StrideClass stride_class(std::size_t dim) const { return dims_.at(dim); }
  // Dimension `dim`'s stride: Const 1 or 0 where the class fixes it, else the Int variable "<tensor>.s<dim>".
  Expr stride(std::string_view tensor, std::size_t dim) const;
  // The element offset of `coords` (one per dimension).
  Expr offset(std::string_view tensor, std::span<const Expr> coords) const;
  // The dimension with unit stride, if any.
  std::optional<std::size_t> contiguous_dim() const;

  // One letter per dimension, outermost first: 'r' runtime, 'u' unit, 'b' broadcast ("rrru" for a dense rank-4 view).
  std::string name() const;
  static std::optional<StridedLayout> parse(std::string_view name);
  friend bool operator==(const StridedLayout&, const StridedLayout&) = default;

 private:
  std::vector<StrideClass> dims_;
};

}  // namespace tessera
