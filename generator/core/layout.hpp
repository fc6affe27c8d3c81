// Layouts map a logical (row, col) of a matrix to a memory offset, as index expressions both emitters print.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "generator/core/expr.hpp"

namespace tessera {

enum class LayoutKind : unsigned char {
  RowMajor,  // column stride 1, row stride = leading dimension
  ColMajor,  // row stride 1, column stride = leading dimension
  Strided,   // both strides are runtime values (vectors with a stride, broadcasts, general views)
  Zero,      // reads zeros and stores nothing: beta = 0 is a layout, not a flag
};

// Every layout also has a runtime batch stride (0 when not batched).
class Layout {
 public:
  constexpr Layout() = default;
  constexpr explicit Layout(LayoutKind kind) : kind_(kind) {}
  static constexpr Layout row_major() { return Layout(LayoutKind::RowMajor); }
  static constexpr Layout col_major() { return Layout(LayoutKind::ColMajor); }
  static constexpr Layout strided() { return Layout(LayoutKind::Strided); }
  static constexpr Layout zero() { return Layout(LayoutKind::Zero); }

  LayoutKind kind() const { return kind_; }
  bool reads_memory() const { return kind_ != LayoutKind::Zero; }
  // The same memory seen as the transposed matrix.
  Layout transposed() const;

  // Strides as expressions: Const 1 where the layout fixes it, else the Int variable "<tensor>.rs"/"<tensor>.cs".
  Expr row_stride(std::string_view tensor) const;
  Expr col_stride(std::string_view tensor) const;
  Expr batch_stride(std::string_view tensor) const;
  Expr offset(std::string_view tensor, const Expr& row, const Expr& col, const Expr& batch) const;

  std::string_view name() const;  // "row", "col", "strided", "zero"
  static std::optional<Layout> parse(std::string_view name);
  friend bool operator==(const Layout&, const Layout&) = default;

 private:
  LayoutKind kind_ = LayoutKind::RowMajor;
};

}  // namespace tessera
