#include "generator/core/expr_parser.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

namespace tessera {

namespace {
constexpr int kMaxDepth = 200;  // deeper nesting is refused rather than risking the stack

ExprOp comparison_op(std::string_view text, std::size_t& length) {
  for (const auto& [symbol, op] : comparisons())
    if (text.starts_with(symbol)) {
      length = symbol.size();
      return op;
    }
  length = 0;
  return ExprOp::Const;
}
}  // namespace

struct ExprParser::DepthGuard {
  ExprParser& p;
  explicit DepthGuard(ExprParser& parser) : p(parser) {
    if (++p.depth_ > kMaxDepth) p.fail(p.pos_, "expression nested too deeply");
  }
  ~DepthGuard() { --p.depth_; }
};

// expression := conditional; conditional := comparison ('?' conditional ':' conditional)?;
// comparison := additive (cmp additive)?; additive := term (('+'|'-') term)*; term := unary (('*'|'/') unary)*;
// unary := ('-'|'+') unary | primary; primary := number | name | name(args) | name[indices] | (expression).
Expr ExprParser::parse() {
  skip_space();
  if (pos_ == text_.size()) fail(pos_, "empty expression");
  const std::size_t start = pos_;
  Expr e = expression();
  skip_space();
  if (pos_ != text_.size()) fail(pos_, "unexpected '" + std::string(1, text_[pos_]) + "'");
  if (e->type == ExprType::Bool)
    fail(start, std::string(whole()) + " must be a value, not a condition (write `condition ? a : b`)");
  return to_float(e);
}

void ExprParser::skip_space() {
  while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
}

bool ExprParser::accept(char c) {
  skip_space();
  if (pos_ < text_.size() && text_[pos_] == c) {
    ++pos_;
    return true;
  }
  return false;
}

void ExprParser::expect(char c) {
  skip_space();
  if (pos_ >= text_.size()) fail(pos_, std::string("expected '") + c + "' but the text ended");
  if (text_[pos_] != c) fail(pos_, std::string("expected '") + c + "', found '" + text_[pos_] + "'");
  ++pos_;
}

std::string ExprParser::identifier() {
  const std::size_t start = pos_;
  while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
  return std::string(text_.substr(start, pos_ - start));
}

Expr ExprParser::expression() {
  DepthGuard guard(*this);
  return conditional();
}

Expr ExprParser::conditional() {
  skip_space();
  const std::size_t start = pos_;
  Expr e = comparison();
  if (!accept('?')) return e;
  if (e->type != ExprType::Bool) fail(start, "the part before '?' must be a comparison");
  const std::size_t then_at = pos_;
  Expr then = value(then_at, expression());
  expect(':');
  skip_space();
  const std::size_t else_at = pos_;
  Expr otherwise = value(else_at, expression());
  return select(std::move(e), std::move(then), std::move(otherwise));
}

Expr ExprParser::comparison() {
  skip_space();
  const std::size_t start = pos_;
  Expr e = additive();
  skip_space();
  std::size_t length = 0;
  const ExprOp op = comparison_op(text_.substr(pos_), length);
  if (length == 0) return e;
  pos_ += length;
  const std::size_t right_at = pos_;
  Expr right = value(right_at, additive());
  e = value(start, std::move(e));
  skip_space();
  if (comparison_op(text_.substr(pos_), length), length > 0)
    fail(pos_, "comparisons do not chain: write (a < b) ? ... or compare two values");
  return compare(op, std::move(e), std::move(right));
}

void ExprParser::count_node(std::size_t at) {
  if (++nodes_ > kMaxExprNodes)
    fail(at, "expression too long: more than " + std::to_string(kMaxExprNodes) + " operations and values");
}

Expr ExprParser::value(std::size_t at, Expr e) {
  if (e->type == ExprType::Bool) fail(at, "a comparison is not a value here (write `condition ? a : b`)");
  return e;
}

Expr ExprParser::arithmetic(ExprOp op, std::size_t a_at, Expr a, std::size_t b_at, Expr b) {
  count_node(b_at);
  a = value(a_at, std::move(a));
  b = value(b_at, std::move(b));
  if (a->type != b->type) {
    // An integral constant joins index math; anything else makes the result a Float.
    const auto integral = [](const Expr& e) {
      return e->op == ExprOp::Const && std::nearbyint(e->value) == e->value && std::abs(e->value) < 9.0e15;
    };
    if (a->type == ExprType::Int && integral(b) && op != ExprOp::Div)
      b = int_constant(static_cast<long long>(b->value));
    else if (b->type == ExprType::Int && integral(a) && op != ExprOp::Div)
      a = int_constant(static_cast<long long>(a->value));
    else
      a = to_float(a), b = to_float(b);
  }
  // `/` is real division: integer operands are divided as Floats.
  if (op == ExprOp::Div && a->type == ExprType::Int) a = to_float(a), b = to_float(b);
  switch (op) {
    case ExprOp::Add:
      return a + b;
    case ExprOp::Sub:
      return a - b;
    case ExprOp::Mul:
      return a * b;
    default:
      return a / b;
  }
}

Expr ExprParser::additive() {
  skip_space();
  const std::size_t start = pos_;
  Expr e = term();
  for (;;) {
    const ExprOp op = accept('+') ? ExprOp::Add : accept('-') ? ExprOp::Sub : ExprOp::Const;
    if (op == ExprOp::Const) return e;
    skip_space();
    const std::size_t at = position();
    e = arithmetic(op, start, std::move(e), at, term());
  }
}

Expr ExprParser::term() {
  skip_space();
  const std::size_t start = pos_;
  Expr e = unary();
  for (;;) {
    const ExprOp op = accept('*') ? ExprOp::Mul : accept('/') ? ExprOp::Div : ExprOp::Const;
    if (op == ExprOp::Const) return e;
    skip_space();
    const std::size_t at = position();
    e = arithmetic(op, start, std::move(e), at, unary());
  }
}

Expr ExprParser::unary() {
  DepthGuard guard(*this);
  skip_space();
  const std::size_t start = pos_;
  if (accept('-')) return -value(start, unary());
  if (accept('+')) return value(start, unary());
  return primary();
}

Expr ExprParser::number() {
  const std::size_t start = pos_;
  while (pos_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '.')) ++pos_;
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    ++pos_;
    if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  const std::string literal(text_.substr(start, pos_ - start));
  double value = 0;
  const auto [end, ec] = std::from_chars(literal.data(), literal.data() + literal.size(), value);
  const bool whole_literal = end == literal.data() + literal.size();
  if (whole_literal && (ec == std::errc::result_out_of_range || std::abs(value) > 3.4e38))
    fail(start, "number '" + literal + "' is out of f32 range");
  if (ec != std::errc() || !whole_literal) fail(start, "malformed number '" + literal + "'");
  return constant(value);
}

Expr ExprParser::primary() {
  skip_space();
  if (pos_ >= text_.size()) fail(pos_, "expected a value but the text ended");
  count_node(pos_);
  const char ch = text_[pos_];
  if (std::isdigit(static_cast<unsigned char>(ch)) || ch == '.') return number();
  if (ch == '(') {
    ++pos_;
    Expr e = expression();
    expect(')');
    return e;
  }
  if (!(std::isalpha(static_cast<unsigned char>(ch)) || ch == '_')) fail(pos_, std::string("unexpected '") + ch + "'");
  const std::size_t start = pos_;
  const std::string word = identifier();
  skip_space();
  const char next = pos_ < text_.size() ? text_[pos_] : '\0';
  if (next == '(') return function_call(start, word);
  if (next == '[') return tensor_read(start, word);
  if (word == "inf") return constant(std::numeric_limits<double>::infinity());
  if (find_function(word)) fail(start, "function '" + word + "' needs arguments: " + word + "(...)");
  return name(start, word);
}

Expr ExprParser::function_call(std::size_t start, const std::string& word) {
  const FunctionInfo* f = find_function(word);
  if (!f) fail(start, "unknown function '" + word + "'");
  expect('(');
  std::vector<Expr> args;
  if (!accept(')')) {
    do {
      skip_space();
      const std::size_t at = pos_;
      args.push_back(to_float(value(at, expression())));
    } while (accept(','));
    expect(')');
  }
  if (static_cast<int>(args.size()) != f->arity)
    fail(start, "function '" + word + "' takes " + std::to_string(f->arity) + " argument" + (f->arity == 1 ? "" : "s") +
                    ", got " + std::to_string(args.size()));
  return call(f->op, std::move(args));
}

}  // namespace tessera
