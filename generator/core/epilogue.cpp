#include "generator/core/epilogue.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "generator/core/error.hpp"
#include "generator/core/expr_parser.hpp"

namespace tessera {

namespace {

// The epilogue language: scalars acc, c, alpha, beta; tensors indexed by the output coordinates [m], [n] or [m,n].
class EpilogueParser : public ExprParser {
 public:
  EpilogueParser(std::string_view text, bool sampled) : ExprParser(text), sampled_(sampled) {}

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& what) const override {
    throw EpilogueError(std::string(text()), at + 1, what);
  }
  std::string_view whole() const override { return "the epilogue"; }

  Expr name(std::size_t start, const std::string& word) override {
    if (sampled_) {
      if (word == "acc" || word == "alpha" || word == "s") return var(word);
      if (word == "c" || word == "beta")
        fail(start, "'" + word + "' has no meaning in a sampled product (SDDMM): the pattern's value is s");
    } else if (word == "acc" || word == "c" || word == "alpha" || word == "beta") {
      return var(word);
    }
    if (word == "m" || word == "n") fail(start, "index '" + word + "' may only appear inside [...]");
    if (sampled_)
      fail(start, "unknown name '" + word + "' (scalars are acc, alpha, s; tensors need an index: " + word + "[n] or " +
                      word + "[m])");
    fail(start, "unknown name '" + word + "' (scalars are acc, c, alpha, beta; tensors need an index: " + word +
                    "[n], " + word + "[m] or " + word + "[m,n])");
  }

  Expr tensor_read(std::size_t start, const std::string& word) override {
    if (is_reserved_epilogue_name(word) || (sampled_ && word == "s"))
      fail(start, "'" + word + "' is reserved and cannot be indexed");
    expect('[');
    std::vector<std::string> indices;
    do {
      skip_space();
      const std::size_t at = position();
      std::string index = identifier();
      if (index != "m" && index != "n")
        fail(at, index.empty() ? "expected index m or n" : "index must be m or n, found '" + index + "'");
      indices.push_back(index);
    } while (accept(','));
    expect(']');
    const bool valid =
        (indices.size() == 1) || (!sampled_ && indices.size() == 2 && indices[0] == "m" && indices[1] == "n");
    if (!valid)
      fail(start, sampled_ ? "tensor '" + word + "' must be indexed [m] or [n] in a sampled product"
                           : "tensor '" + word + "' must be indexed [m], [n] or [m,n]");
    std::vector<Expr> index_exprs;
    for (const auto& i : indices) index_exprs.push_back(var(i, ExprType::Int));
    return read(word, std::move(index_exprs));
  }

  bool sampled_;
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
         name == "inf" || find_function(name) != nullptr;
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

Epilogue::Epilogue(Expr tree, bool sampled) {
  auto s = std::make_shared<State>();
  s->sampled = sampled;
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
      s->reads_s |= node.name == "s";
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

Epilogue Epilogue::parse(std::string_view text) { return Epilogue(EpilogueParser(text, false).parse(), false); }

Epilogue Epilogue::parse_sampled(std::string_view text) { return Epilogue(EpilogueParser(text, true).parse(), true); }

Epilogue Epilogue::from_tree(Expr tree) {
  if (!tree) throw InvalidArgument("epilogue", "empty expression tree");
  if (node_count(tree, kMaxExprNodes) > kMaxExprNodes)
    throw InvalidArgument("epilogue", "expression tree has more than " + std::to_string(kMaxExprNodes) + " nodes");
  // Re-parsing the canonical text applies exactly the rules user text obeys.
  const std::string text = to_string(tree);
  Epilogue parsed = parse(text);
  if (!structurally_equal(parsed.tree(), tree))
    throw InvalidArgument("epilogue", "expression tree is not a valid epilogue: " + text);
  return parsed;
}

Epilogue Epilogue::linear_combination() {
  // Built once: every default-constructed signature copies it (a shared tree, no re-parsing).
  static const Epilogue instance(var("alpha") * var("acc") + var("beta") * var("c"), false);
  return instance;
}

}  // namespace tessera
