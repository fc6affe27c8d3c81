#include "generator/attention/score_modifier.hpp"

#include <algorithm>
#include <cmath>

#include "generator/core/expr_parser.hpp"

namespace tessera {

namespace {
bool is_position(std::string_view name) { return name == "i" || name == "j" || name == "h" || name == "b"; }

// The score-modifier language: s (Float), the positions i, j, h, b (Int), other names are scalars; tensors are
// read at integer expressions of the positions.
class ScoreModifierParser : public ExprParser {
 public:
  explicit ScoreModifierParser(std::string_view text) : ExprParser(text) {}

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& what) const override {
    throw ScoreModifierError(std::string(text()), at + 1, what);
  }
  std::string_view whole() const override { return "a score modifier"; }

  Expr name(std::size_t, const std::string& word) override {
    if (word == "s") return var(word);
    if (is_position(word)) return var(word, ExprType::Int);
    return var(word);  // a named scalar, bound by the call
  }

  Expr tensor_read(std::size_t start, const std::string& word) override {
    if (is_reserved_score_name(word)) fail(start, "'" + word + "' is reserved and cannot be indexed");
    expect('[');
    std::vector<Expr> indices;
    do {
      skip_space();
      const std::size_t at = position();
      Expr index = expression();
      if (index->type != ExprType::Int)
        fail(at, "an index must be integer: positions i, j, h, b and whole numbers (with + - *)");
      indices.push_back(std::move(index));
    } while (accept(','));
    expect(']');
    return read(word, std::move(indices));
  }
};
}  // namespace

bool is_reserved_score_name(std::string_view name) {
  return name == "s" || is_position(name) || name == "inf" || find_function(name) != nullptr;
}

ScoreModifier::ScoreModifier(Expr tree) {
  auto s = std::make_shared<State>();
  s->tree = std::move(tree);
  s->text = to_string(s->tree);
  visit(s->tree, [&](const ExprNode& node) {
    if (node.op == ExprOp::Var && (node.name == "i" || node.name == "j")) s->reads_positions = true;
    if (node.op == ExprOp::Var && !is_reserved_score_name(node.name) &&
        std::find(s->scalars.begin(), s->scalars.end(), node.name) == s->scalars.end())
      s->scalars.push_back(node.name);
    if (node.op == ExprOp::Const && std::isinf(node.value)) s->can_mask = true;
    if (node.op == ExprOp::Read) {
      const TensorUse use{node.name, node.args.size()};
      auto it = std::find_if(s->tensors.begin(), s->tensors.end(), [&](const auto& t) { return t.name == use.name; });
      if (it == s->tensors.end())
        s->tensors.push_back(use);
      else if (it->rank != use.rank)
        throw InvalidArgument("score_mod", "tensor '" + use.name + "' is read with " + std::to_string(it->rank) +
                                               " and with " + std::to_string(use.rank) + " indices");
    }
  });
  std::sort(s->tensors.begin(), s->tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  std::sort(s->scalars.begin(), s->scalars.end());
  for (const auto& t : s->tensors)
    if (std::binary_search(s->scalars.begin(), s->scalars.end(), t.name))
      throw InvalidArgument("score_mod", "'" + t.name + "' is used both as a scalar and as a tensor");
  state_ = std::move(s);
}

ScoreModifier ScoreModifier::parse(std::string_view text) { return ScoreModifier(ScoreModifierParser(text).parse()); }

ScoreModifier ScoreModifier::identity() {
  static const ScoreModifier kIdentity = parse("s");
  return kIdentity;
}

}  // namespace tessera
