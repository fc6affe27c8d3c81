// The small expression IR shared by layouts, transforms and epilogues; each back-end prints it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

enum class ExprOp : unsigned char {
  Const,
  Var,   // a named scalar: acc, c, alpha, beta, or an index/stride variable
  Read,  // a named tensor read at index expressions: bias[n]
  Neg,
  Add,
  Sub,
  Mul,
  Div,
  Min,
  Max,
  Clamp,
  Abs,
  Sqrt,
  Relu,
  Exp,
  Tanh,
  Sigmoid,
  Silu,
  Gelu,
  GeluTanh,
  // Comparisons of two Float or two Int operands, Bool-typed; Select(condition, then, else); an Int as a Float.
  Lt,
  Le,
  Gt,
  Ge,
  Eq,
  Ne,
  Select,
  ToFloat,
};

// Float expressions are elementwise math; Int expressions are index math (64-bit); Bool ones are conditions.
enum class ExprType : unsigned char { Float, Int, Bool };

struct ExprNode;
using Expr = std::shared_ptr<const ExprNode>;

struct ExprNode {
  ExprOp op;
  ExprType type;
  double value = 0;  // Const
  std::string name;  // Var, Read
  std::vector<Expr> args;
  // A constructor, not aggregate initialisation: make_shared's parenthesised form of that needs clang 16, and the
  // fuzz targets build with Debian 12's clang.
  ExprNode(ExprOp op_, ExprType type_, double value_, std::string name_, std::vector<Expr> args_)
      : op(op_), type(type_), value(value_), name(std::move(name_)), args(std::move(args_)) {}
  // Releases the children without recursing: a tree built through the C++ operators can be tens of thousands of
  // levels deep, and a recursive release takes several frames per level.
  ~ExprNode();
};

// A callable function of the epilogue language.
struct FunctionInfo {
  std::string_view name;
  ExprOp op;
  int arity;
};
const FunctionInfo* find_function(std::string_view name);
const std::vector<FunctionInfo>& functions();

// A comparison of the text form: its symbol and op. Longest symbols first, so a parser may match them in order.
struct ComparisonInfo {
  std::string_view symbol;
  ExprOp op;
};
const std::vector<ComparisonInfo>& comparisons();
bool is_comparison(ExprOp op);

Expr constant(double value, ExprType type = ExprType::Float);
Expr int_constant(long long value);
Expr var(std::string name, ExprType type = ExprType::Float);
Expr read(std::string tensor, std::vector<Expr> indices);
Expr call(ExprOp op, std::vector<Expr> args);

// Arithmetic; Int operands are folded (x*1, x*0, x+0, constants) so index math prints small.
Expr operator+(const Expr& a, const Expr& b);
Expr operator-(const Expr& a, const Expr& b);
Expr operator*(const Expr& a, const Expr& b);
Expr operator/(const Expr& a, const Expr& b);
Expr operator-(const Expr& a);
// A comparison (op Lt..Ne) of operands of one type; an Int operand beside a Float one is converted.
Expr compare(ExprOp op, Expr a, Expr b);
// `then` where the Bool condition holds, else `otherwise` (an Int branch beside a Float one is converted).
Expr select(Expr condition, Expr then, Expr otherwise);
// An Int expression as a Float (a Float is returned as it is).
Expr to_float(const Expr& e);

bool is_constant(const Expr& e, double value);
bool structurally_equal(const Expr& a, const Expr& b);

// Canonical text: re-parses to the same tree, e.g. "gelu(alpha*acc + bias[n])".
std::string to_string(const Expr& e);

// The nodes of e, counted without recursion and up to limit + 1: the printers and visitors recurse, so a text or a
// tree of more nodes than kMaxExprNodes is refused before anything walks it.
std::size_t node_count(const Expr& e, std::size_t limit);
inline constexpr std::size_t kMaxExprNodes = 4096;

// Calls f on every node, parents before children.
void visit(const Expr& e, const std::function<void(const ExprNode&)>& f);

}  // namespace tessera
