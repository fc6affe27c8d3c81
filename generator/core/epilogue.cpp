#include "generator/core/epilogue.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "generator/core/error.hpp"

namespace tessera {

namespace {

constexpr int kMaxDepth = 200;  // deeper nesting is refused rather than risking the stack

// Recursive descent over: expr := term (('+'|'-') term)*; term := unary (('*'|'/') unary)*;
// unary := ('-'|'+') unary | primary; primary := number | name | name(args) | name[index] | (expr).
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Expr parse() {
    skip_space();
    if (pos_ == text_.size()) fail(pos_, "empty expression");
    Expr e = expression();
    skip_space();
    if (pos_ != text_.size()) fail(pos_, "unexpected '" + std::string(1, text_[pos_]) + "'");
    return e;
  }

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    throw EpilogueError(std::string(text_), at + 1, what);
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  void expect(char c) {
    skip_space();
    if (pos_ >= text_.size()) fail(pos_, std::string("expected '") + c + "' but the text ended");
    if (text_[pos_] != c) fail(pos_, std::string("expected '") + c + "', found '" + text_[pos_] + "'");
    ++pos_;
  }

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth) p.fail(p.pos_, "expression nested too deeply");
    }
    ~DepthGuard() { --p.depth_; }
  };

  Expr expression() {
    DepthGuard guard(*this);
    Expr e = term();
    for (;;) {
      if (accept('+'))
        e = e + term();
      else if (accept('-'))
        e = e - term();
      else
        return e;
    }
  }

  Expr term() {
    Expr e = unary();
    for (;;) {
      if (accept('*'))
        e = e * unary();
      else if (accept('/'))
        e = e / unary();
      else
        return e;
    }
  }

  Expr unary() {
    DepthGuard guard(*this);
    if (accept('-')) return -unary();
    if (accept('+')) return unary();
    return primary();
  }

  std::string identifier() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }

  Expr number() {
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
    const bool whole = end == literal.data() + literal.size();
    if (whole && (ec == std::errc::result_out_of_range || std::abs(value) > 3.4e38))
      fail(start, "number '" + literal + "' is out of f32 range");
    if (ec != std::errc() || !whole) fail(start, "malformed number '" + literal + "'");
    return constant(value);
  }

  Expr primary() {
    skip_space();
    if (pos_ >= text_.size()) fail(pos_, "expected a value but the text ended");
    const char ch = text_[pos_];
    if (std::isdigit(static_cast<unsigned char>(ch)) || ch == '.') return number();
    if (ch == '(') {
      ++pos_;
      Expr e = expression();
      expect(')');
      return e;
    }
    if (!(std::isalpha(static_cast<unsigned char>(ch)) || ch == '_'))
      fail(pos_, std::string("unexpected '") + ch + "'");

    const std::size_t start = pos_;
    const std::string name = identifier();
    skip_space();
    const char next = pos_ < text_.size() ? text_[pos_] : '\0';
    if (next == '(') return function_call(start, name);
    if (next == '[') return tensor_read(start, name);
    if (name == "acc" || name == "c" || name == "alpha" || name == "beta") return var(name);
    if (find_function(name)) fail(start, "function '" + name + "' needs arguments: " + name + "(...)");
    if (name == "m" || name == "n") fail(start, "index '" + name + "' may only appear inside [...]");
    fail(start, "unknown name '" + name + "' (scalars are acc, c, alpha, beta; tensors need an index: " + name +
                    "[n], " + name + "[m] or " + name + "[m,n])");
  }

  Expr function_call(std::size_t start, const std::string& name) {
    const FunctionInfo* f = find_function(name);
    if (!f) fail(start, "unknown function '" + name + "'");
    expect('(');
    std::vector<Expr> args;
    if (!accept(')')) {
      do args.push_back(expression());
      while (accept(','));
      expect(')');
    }
    if (static_cast<int>(args.size()) != f->arity)
      fail(start, "function '" + name + "' takes " + std::to_string(f->arity) + " argument" +
                      (f->arity == 1 ? "" : "s") + ", got " + std::to_string(args.size()));
    return call(f->op, std::move(args));
  }

  Expr tensor_read(std::size_t start, const std::string& name) {
    if (is_reserved_epilogue_name(name)) fail(start, "'" + name + "' is reserved and cannot be indexed");
    expect('[');
    std::vector<std::string> indices;
    do {
      skip_space();
      const std::size_t at = pos_;
      std::string index = identifier();
      if (index != "m" && index != "n")
        fail(at, index.empty() ? "expected index m or n" : "index must be m or n, found '" + index + "'");
      indices.push_back(index);
    } while (accept(','));
    expect(']');
    const bool valid = (indices.size() == 1) || (indices.size() == 2 && indices[0] == "m" && indices[1] == "n");
    if (!valid) fail(start, "tensor '" + name + "' must be indexed [m], [n] or [m,n]");
    std::vector<Expr> index_exprs;
    for (const auto& i : indices) index_exprs.push_back(var(i, ExprType::Int));
    return read(name, std::move(index_exprs));
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

IndexForm form_of(const ExprNode& read_node) {
  if (read_node.args.size() == 2) return IndexForm::MN;
  return read_node.args[0]->name == "m" ? IndexForm::M : IndexForm::N;
}

}  // namespace

std::string_view index_form_name(IndexForm form) {
  switch (form) {
    case IndexForm::M:
      return "m";
    case IndexForm::N:
      return "n";
    case IndexForm::MN:
      return "m,n";
  }
  return "?";
}

bool is_reserved_epilogue_name(std::string_view name) {
  return name == "acc" || name == "c" || name == "alpha" || name == "beta" || name == "m" || name == "n" ||
         find_function(name) != nullptr;
}

namespace {
bool c_only_under_beta(const Expr& e, bool under_beta) {
  if (e->op == ExprOp::Var) return e->name != "c" || under_beta;
  const bool beta_product = e->op == ExprOp::Mul && std::any_of(e->args.begin(), e->args.end(), [](const Expr& a) {
                              return a->op == ExprOp::Var && a->name == "beta";
                            });
  return std::all_of(e->args.begin(), e->args.end(),
                     [&](const Expr& a) { return c_only_under_beta(a, under_beta || beta_product); });
}
}  // namespace

Epilogue::Epilogue(Expr tree) {
  auto s = std::make_shared<State>();
  s->tree = std::move(tree);
  s->text = to_string(s->tree);
  auto& tensors = s->tensors;
  visit(s->tree, [&](const ExprNode& node) {
    switch (node.op) {
      case ExprOp::Exp:
      case ExprOp::Tanh:
      case ExprOp::Sigmoid:
      case ExprOp::Silu:
      case ExprOp::Gelu:
      case ExprOp::GeluTanh:
        s->calls_transcendental = true;
        break;
      default:
        break;
    }
    if (node.op == ExprOp::Var) {
      s->reads_c |= node.name == "c";
      s->reads_alpha |= node.name == "alpha";
      s->reads_beta |= node.name == "beta";
    } else if (node.op == ExprOp::Read) {
      const EpilogueTensor t{node.name, form_of(node)};
      auto it = std::find_if(tensors.begin(), tensors.end(), [&](const auto& x) { return x.name == t.name; });
      if (it == tensors.end())
        tensors.push_back(t);
      else if (it->form != t.form)
        throw InvalidArgument("epilogue", "tensor '" + t.name + "' is indexed both [" +
                                              std::string(index_form_name(it->form)) + "] and [" +
                                              std::string(index_form_name(t.form)) + "]");
    }
  });
  std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  s->c_scaled_by_beta = s->reads_c && c_only_under_beta(s->tree, false);
  state_ = std::move(s);
}

Epilogue Epilogue::parse(std::string_view text) { return Epilogue(Parser(text).parse()); }

Epilogue Epilogue::from_tree(Expr tree) {
  if (!tree) throw InvalidArgument("epilogue", "empty expression tree");
  // Re-parsing the canonical text applies exactly the rules user text obeys.
  const std::string text = to_string(tree);
  Epilogue parsed = parse(text);
  if (!structurally_equal(parsed.tree(), tree))
    throw InvalidArgument("epilogue", "expression tree is not a valid epilogue: " + text);
  return parsed;
}

Epilogue Epilogue::linear_combination() {
  // Built once: every default-constructed signature copies it (a shared tree, no re-parsing).
  static const Epilogue instance(var("alpha") * var("acc") + var("beta") * var("c"));
  return instance;
}

}  // namespace tessera
