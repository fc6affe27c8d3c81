// The text form of Expr that users write — epilogues, attention score modifiers: numbers and `inf`, + - * /, unary
// minus, comparisons (< <= > >= == !=), `condition ? a : b`, function calls, names and tensor reads. Each language
// derives a parser that says what its names and tensor indices mean; the grammar, the types and the error reporting
// (the column, as ExprTextError) are shared.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "generator/core/expr.hpp"

namespace tessera {

class ExprParser {
 public:
  virtual ~ExprParser() = default;
  // The whole text as one value (Int results become Float); throws the language's ExprTextError.
  Expr parse();

 protected:
  explicit ExprParser(std::string_view text) : text_(text) {}

  // A bare name, starting at `at` (not a function; `inf` is handled before).
  virtual Expr name(std::size_t at, const std::string& name) = 0;
  // `name[` ... `]`: the position is at '['; parse the indices with the helpers below.
  virtual Expr tensor_read(std::size_t at, const std::string& name) = 0;
  [[noreturn]] virtual void fail(std::size_t at, const std::string& what) const = 0;
  // What a value of the language is called in messages ("the epilogue", "a score modifier").
  virtual std::string_view whole() const = 0;

  void skip_space();
  bool accept(char c);
  void expect(char c);
  std::string identifier();
  Expr expression();
  std::size_t position() const { return pos_; }
  const std::string_view& text() const { return text_; }

 private:
  struct DepthGuard;
  Expr conditional();
  Expr comparison();
  Expr additive();
  Expr term();
  Expr unary();
  Expr primary();
  Expr number();
  Expr function_call(std::size_t start, const std::string& name);
  // Arithmetic on two values: an Int beside a Float becomes a Float, except an integral constant, which joins the
  // Int (so `i - j + 128` stays index math).
  Expr arithmetic(ExprOp op, std::size_t a_at, Expr a, std::size_t b_at, Expr b);
  Expr value(std::size_t at, Expr e);  // refuses a condition where a value is needed

  // Counts a node made at `at`; fails past kMaxExprNodes.
  void count_node(std::size_t at);

  std::string_view text_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  std::size_t nodes_ = 0;
};

}  // namespace tessera
