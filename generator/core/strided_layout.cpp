#include "generator/core/strided_layout.hpp"

#include <algorithm>
#include <stdexcept>

namespace tessera {

StridedLayout StridedLayout::of(std::span<const std::int64_t> strides) {
  std::vector<StrideClass> dims(strides.size(), StrideClass::Runtime);
  bool unit_taken = false;
  for (std::size_t d = strides.size(); d-- > 0;) {
    if (strides[d] == 0) {
      dims[d] = StrideClass::Broadcast;
    } else if (strides[d] == 1 && !unit_taken) {
      dims[d] = StrideClass::Unit;
      unit_taken = true;
    }
  }
  return StridedLayout(std::move(dims));
}

StridedLayout StridedLayout::dense(std::size_t rank) {
  std::vector<StrideClass> dims(rank, StrideClass::Runtime);
  if (rank > 0) dims.back() = StrideClass::Unit;
  return StridedLayout(std::move(dims));
}

StridedLayout StridedLayout::of_matrix(const Layout& layout) {
  switch (layout.kind()) {
    case LayoutKind::RowMajor:
      return StridedLayout({StrideClass::Runtime, StrideClass::Unit});
    case LayoutKind::ColMajor:
      return StridedLayout({StrideClass::Unit, StrideClass::Runtime});
    case LayoutKind::Strided:
      return StridedLayout({StrideClass::Runtime, StrideClass::Runtime});
    case LayoutKind::Zero:
      break;
  }
  throw std::invalid_argument("StridedLayout: a zero layout reads no memory");
}

Expr StridedLayout::stride(std::string_view tensor, std::size_t dim) const {
  switch (dims_.at(dim)) {
    case StrideClass::Unit:
      return int_constant(1);
    case StrideClass::Broadcast:
      return int_constant(0);
    case StrideClass::Runtime:
      break;
  }
  return var(std::string(tensor) + ".s" + std::to_string(dim), ExprType::Int);
}

Expr StridedLayout::offset(std::string_view tensor, std::span<const Expr> coords) const {
  if (coords.size() != dims_.size())
    throw std::invalid_argument("StridedLayout: " + std::to_string(coords.size()) + " coordinates for rank " +
                                std::to_string(dims_.size()));
  if (dims_.empty()) return int_constant(0);
  Expr sum = coords[0] * stride(tensor, 0);
  for (std::size_t d = 1; d < dims_.size(); ++d) sum = sum + coords[d] * stride(tensor, d);
  return sum;
}

std::optional<std::size_t> StridedLayout::contiguous_dim() const {
  for (std::size_t d = 0; d < dims_.size(); ++d)
    if (dims_[d] == StrideClass::Unit) return d;
  return std::nullopt;
}

std::string StridedLayout::name() const {
  std::string text;
  for (StrideClass c : dims_) text += c == StrideClass::Unit ? 'u' : c == StrideClass::Broadcast ? 'b' : 'r';
  return text;
}

std::optional<StridedLayout> StridedLayout::parse(std::string_view name) {
  std::vector<StrideClass> dims;
  for (char c : name) {
    if (c == 'r')
      dims.push_back(StrideClass::Runtime);
    else if (c == 'u')
      dims.push_back(StrideClass::Unit);
    else if (c == 'b')
      dims.push_back(StrideClass::Broadcast);
    else
      return std::nullopt;
  }
  if (std::count(dims.begin(), dims.end(), StrideClass::Unit) > 1) return std::nullopt;
  return StridedLayout(std::move(dims));
}

}  // namespace tessera
