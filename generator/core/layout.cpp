#include "generator/core/layout.hpp"

#include <stdexcept>

namespace tessera {

Layout Layout::transposed() const {
  switch (kind_) {
    case LayoutKind::RowMajor:
      return col_major();
    case LayoutKind::ColMajor:
      return row_major();
    default:
      return *this;
  }
}

Expr Layout::row_stride(std::string_view tensor) const {
  switch (kind_) {
    case LayoutKind::ColMajor:
      return int_constant(1);
    case LayoutKind::Zero:
      return int_constant(0);
    default:
      return var(std::string(tensor) + ".rs", ExprType::Int);
  }
}

Expr Layout::col_stride(std::string_view tensor) const {
  switch (kind_) {
    case LayoutKind::RowMajor:
      return int_constant(1);
    case LayoutKind::Zero:
      return int_constant(0);
    default:
      return var(std::string(tensor) + ".cs", ExprType::Int);
  }
}

Expr Layout::batch_stride(std::string_view tensor) const {
  if (kind_ == LayoutKind::Zero) return int_constant(0);
  return var(std::string(tensor) + ".bs", ExprType::Int);
}

Expr Layout::offset(std::string_view tensor, const Expr& row, const Expr& col, const Expr& batch) const {
  return batch * batch_stride(tensor) + row * row_stride(tensor) + col * col_stride(tensor);
}

std::string_view Layout::name() const {
  switch (kind_) {
    case LayoutKind::RowMajor:
      return "row";
    case LayoutKind::ColMajor:
      return "col";
    case LayoutKind::Strided:
      return "strided";
    case LayoutKind::Zero:
      return "zero";
  }
  throw std::logic_error("layout: bad kind");
}

std::optional<Layout> Layout::parse(std::string_view name) {
  for (auto kind : {LayoutKind::RowMajor, LayoutKind::ColMajor, LayoutKind::Strided, LayoutKind::Zero})
    if (Layout(kind).name() == name) return Layout(kind);
  return std::nullopt;
}

}  // namespace tessera
