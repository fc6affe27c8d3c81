// An attention score modifier as users write it — one text for both back-ends, like PyTorch FlexAttention's
// score_mod: an expression over the score `s`, the query and key positions `i` and `j`, the head `h` and the batch
// item `b`, named scalars, and named tensors read at integer index expressions. ALiBi: `s - slope[h]*(i - j)`;
// soft-capping: `30*tanh(s/30)`; a relative bias: `s + bias[h, i - j + 128]`; a sliding window:
// `j < i - 256 ? -inf : s`. Parsed once into an Expr that both back-ends print.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "generator/core/error.hpp"
#include "generator/core/expr.hpp"

namespace tessera {

class ScoreModifierError : public ExprTextError {
 public:
  ScoreModifierError(const std::string& text, std::size_t column, const std::string& what)
      : ExprTextError("score_mod", text, column, what) {}
};

class ScoreModifier {
 public:
  struct TensorUse {
    std::string name;
    std::size_t rank;  // how many indices every read of it gives
    friend bool operator==(const TensorUse&, const TensorUse&) = default;
  };

  // Parses user text; throws ScoreModifierError naming the column.
  static ScoreModifier parse(std::string_view text);
  // `s`: the scores as Q·Kᵀ and the scale give them.
  static ScoreModifier identity();

  const Expr& tree() const { return state_->tree; }
  const std::string& text() const { return state_->text; }                   // canonical: parses back to the same tree
  const std::vector<TensorUse>& tensors() const { return state_->tensors; }  // sorted by name
  const std::vector<std::string>& scalars() const { return state_->scalars; }  // named scalars, sorted
  bool is_identity() const { return state_->text == "s"; }
  // Whether i or j appear: the kernel must know each score's positions, not just its value.
  bool reads_positions() const { return state_->reads_positions; }
  // Whether it can yield -inf (masking), so that whole blocks may be skipped where that is provable.
  bool can_mask() const { return state_->can_mask; }

 private:
  struct State {
    Expr tree;
    std::string text;
    std::vector<TensorUse> tensors;
    std::vector<std::string> scalars;
    bool reads_positions = false, can_mask = false;
  };
  explicit ScoreModifier(Expr tree);
  std::shared_ptr<const State> state_;
};

// Names with a fixed meaning in score-modifier text (s, i, j, h, b, inf and the functions).
bool is_reserved_score_name(std::string_view name);

}  // namespace tessera
