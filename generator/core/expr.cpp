#include "generator/core/expr.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace tessera {

namespace {

// The children of nodes being released on this thread, while an outermost ~ExprNode drains it (else null).
thread_local std::vector<Expr>* release_queue = nullptr;

}  // namespace

ExprNode::~ExprNode() {
  if (release_queue) {  // inside a release: hand the children to it rather than release them in this frame
    for (Expr& a : args) release_queue->push_back(std::move(a));
    return;
  }
  std::vector<Expr> queue = std::move(args);
  release_queue = &queue;
  while (!queue.empty()) {
    Expr last = std::move(queue.back());
    queue.pop_back();
    last.reset();  // a node whose last owner this was appends its children
  }
  release_queue = nullptr;
}

namespace {

Expr make(ExprOp op, ExprType type, std::vector<Expr> args) {
  return std::make_shared<const ExprNode>(op, type, 0.0, std::string(), std::move(args));
}

Expr binary(ExprOp op, const Expr& a, const Expr& b) {
  if (a->type != b->type) throw std::logic_error("expr: mixing Int and Float operands");
  if (a->type == ExprType::Int) {
    const bool ca = a->op == ExprOp::Const, cb = b->op == ExprOp::Const;
    if (ca && cb) {
      const auto x = static_cast<long long>(a->value), y = static_cast<long long>(b->value);
      switch (op) {
        case ExprOp::Add:
          return int_constant(x + y);
        case ExprOp::Sub:
          return int_constant(x - y);
        case ExprOp::Mul:
          return int_constant(x * y);
        default:
          break;
      }
    }
    if (op == ExprOp::Add && is_constant(a, 0)) return b;
    if ((op == ExprOp::Add || op == ExprOp::Sub) && is_constant(b, 0)) return a;
    if (op == ExprOp::Mul && (is_constant(a, 0) || is_constant(b, 0))) return int_constant(0);
    if (op == ExprOp::Mul && is_constant(a, 1)) return b;
    if ((op == ExprOp::Mul || op == ExprOp::Div) && is_constant(b, 1)) return a;
  }
  return make(op, a->type, {a, b});
}

int precedence(const ExprNode& e) {
  if (is_comparison(e.op)) return 0;
  switch (e.op) {
    case ExprOp::Select:
      return -1;
    case ExprOp::ToFloat:
      return precedence(*e.args[0]);
    case ExprOp::Add:
    case ExprOp::Sub:
      return 1;
    case ExprOp::Mul:
    case ExprOp::Div:
      return 2;
    case ExprOp::Neg:
      return 3;
    default:
      return 4;
  }
}

std::string infix(ExprOp op) {
  for (const auto& c : comparisons())
    if (c.op == op) return fmt::format(" {} ", c.symbol);
  switch (op) {
    case ExprOp::Add:
      return " + ";
    case ExprOp::Sub:
      return " - ";
    case ExprOp::Mul:
      return "*";
    default:
      return "/";
  }
}

// Shortest text that reads back to the same double.
std::string format_number(double v) { return fmt::format("{}", v); }

void print(const Expr& e, std::string& out) {
  const auto wrapped = [&](const Expr& child, bool parens) {
    if (parens) out += '(';
    print(child, out);
    if (parens) out += ')';
  };
  if (is_comparison(e->op)) {
    wrapped(e->args[0], precedence(*e->args[0]) < 0);
    out += infix(e->op);
    wrapped(e->args[1], precedence(*e->args[1]) <= 0);
    return;
  }
  switch (e->op) {
    case ExprOp::Const:
      out += format_number(e->value);
      return;
    case ExprOp::Var:
      out += e->name;
      return;
    case ExprOp::Read:
      out += e->name;
      out += '[';
      for (std::size_t i = 0; i < e->args.size(); ++i) {
        if (i) out += ',';
        print(e->args[i], out);
      }
      out += ']';
      return;
    case ExprOp::Neg:
      out += '-';
      wrapped(e->args[0], precedence(*e->args[0]) < 3);
      return;
    case ExprOp::ToFloat:  // implicit in the text: the parser converts where Int meets Float
      print(e->args[0], out);
      return;
    case ExprOp::Select:
      wrapped(e->args[0], precedence(*e->args[0]) <= -1);
      out += " ? ";
      wrapped(e->args[1], precedence(*e->args[1]) <= -1);
      out += " : ";
      wrapped(e->args[2], false);
      return;
    case ExprOp::Add:
    case ExprOp::Sub:
    case ExprOp::Mul:
    case ExprOp::Div: {
      const int p = precedence(*e);
      wrapped(e->args[0], precedence(*e->args[0]) < p);
      out += infix(e->op);
      wrapped(e->args[1], precedence(*e->args[1]) <= p);
      return;
    }
    default: {
      for (const auto& f : functions())
        if (f.op == e->op) out += f.name;
      out += '(';
      for (std::size_t i = 0; i < e->args.size(); ++i) {
        if (i) out += ", ";
        print(e->args[i], out);
      }
      out += ')';
      return;
    }
  }
}

}  // namespace

const std::vector<FunctionInfo>& functions() {
  static const std::vector<FunctionInfo> table{
      {"relu", ExprOp::Relu, 1}, {"gelu", ExprOp::Gelu, 1},       {"gelu_tanh", ExprOp::GeluTanh, 1},
      {"silu", ExprOp::Silu, 1}, {"sigmoid", ExprOp::Sigmoid, 1}, {"tanh", ExprOp::Tanh, 1},
      {"exp", ExprOp::Exp, 1},   {"abs", ExprOp::Abs, 1},         {"sqrt", ExprOp::Sqrt, 1},
      {"min", ExprOp::Min, 2},   {"max", ExprOp::Max, 2},         {"clamp", ExprOp::Clamp, 3},
  };
  return table;
}

const std::vector<ComparisonInfo>& comparisons() {
  static const std::vector<ComparisonInfo> table{{"<=", ExprOp::Le}, {">=", ExprOp::Ge}, {"==", ExprOp::Eq},
                                                 {"!=", ExprOp::Ne}, {"<", ExprOp::Lt},  {">", ExprOp::Gt}};
  return table;
}

bool is_comparison(ExprOp op) {
  const auto& table = comparisons();
  return std::any_of(table.begin(), table.end(), [op](const ComparisonInfo& c) { return c.op == op; });
}

const FunctionInfo* find_function(std::string_view name) {
  for (const auto& f : functions())
    if (f.name == name) return &f;
  return nullptr;
}

Expr constant(double value, ExprType type) {
  return std::make_shared<const ExprNode>(ExprOp::Const, type, value, std::string(), std::vector<Expr>());
}
Expr int_constant(long long value) { return constant(static_cast<double>(value), ExprType::Int); }
Expr var(std::string name, ExprType type) {
  return std::make_shared<const ExprNode>(ExprOp::Var, type, 0.0, std::move(name), std::vector<Expr>());
}
Expr read(std::string tensor, std::vector<Expr> indices) {
  return std::make_shared<const ExprNode>(ExprOp::Read, ExprType::Float, 0.0, std::move(tensor), std::move(indices));
}
Expr call(ExprOp op, std::vector<Expr> args) {
  for (const auto& f : functions())
    if (f.op == op && static_cast<int>(args.size()) != f.arity)
      throw std::logic_error("expr: wrong arity for " + std::string(f.name));
  return make(op, ExprType::Float, std::move(args));
}

Expr operator+(const Expr& a, const Expr& b) { return binary(ExprOp::Add, a, b); }
Expr operator-(const Expr& a, const Expr& b) { return binary(ExprOp::Sub, a, b); }
Expr operator*(const Expr& a, const Expr& b) { return binary(ExprOp::Mul, a, b); }
Expr operator/(const Expr& a, const Expr& b) { return binary(ExprOp::Div, a, b); }
Expr operator-(const Expr& a) {
  if (a->type == ExprType::Int && a->op == ExprOp::Const) return int_constant(-static_cast<long long>(a->value));
  return make(ExprOp::Neg, a->type, {a});
}

Expr to_float(const Expr& e) {
  if (e->type == ExprType::Float) return e;
  if (e->type != ExprType::Int) throw std::logic_error("expr: only an Int converts to Float");
  if (e->op == ExprOp::Const) return constant(e->value);
  return make(ExprOp::ToFloat, ExprType::Float, {e});
}

Expr compare(ExprOp op, Expr a, Expr b) {
  if (!is_comparison(op)) throw std::logic_error("expr: not a comparison");
  if (a->type == ExprType::Bool || b->type == ExprType::Bool) throw std::logic_error("expr: comparing conditions");
  if (a->type != b->type) a = to_float(a), b = to_float(b);
  return make(op, ExprType::Bool, {std::move(a), std::move(b)});
}

Expr select(Expr condition, Expr then, Expr otherwise) {
  if (condition->type != ExprType::Bool) throw std::logic_error("expr: a select needs a condition");
  if (then->type == ExprType::Bool || otherwise->type == ExprType::Bool)
    throw std::logic_error("expr: a select chooses values, not conditions");
  if (then->type != otherwise->type) then = to_float(then), otherwise = to_float(otherwise);
  const ExprType type = then->type;
  return make(ExprOp::Select, type, {std::move(condition), std::move(then), std::move(otherwise)});
}

bool is_constant(const Expr& e, double value) { return e->op == ExprOp::Const && e->value == value; }

bool structurally_equal(const Expr& a, const Expr& b) {
  if (a->op != b->op || a->type != b->type || a->name != b->name || a->args.size() != b->args.size()) return false;
  if (a->op == ExprOp::Const && a->value != b->value) return false;
  for (std::size_t i = 0; i < a->args.size(); ++i)
    if (!structurally_equal(a->args[i], b->args[i])) return false;
  return true;
}

std::string to_string(const Expr& e) {
  std::string out;
  print(e, out);
  return out;
}

std::size_t node_count(const Expr& e, std::size_t limit) {
  std::vector<const ExprNode*> stack{e.get()};
  std::size_t count = 0;
  while (!stack.empty() && count <= limit) {
    const ExprNode* node = stack.back();
    stack.pop_back();
    ++count;
    for (const auto& a : node->args) stack.push_back(a.get());
  }
  return count;
}

void visit(const Expr& e, const std::function<void(const ExprNode&)>& f) {
  f(*e);
  for (const auto& a : e->args) visit(a, f);
}

}  // namespace tessera
