// Score modifiers (and the comparisons and selects the Expr language gained for them): the issue's examples against
// their formulas, canonical text, the CUDA printing, and errors that point at the column.
#include "generator/attention/score_modifier.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "generator/core/epilogue.hpp"
#include "generator/core/expr_eval.hpp"
#include "generator/cuda/expr_cuda.hpp"

namespace tessera {
namespace {

struct Point {
  double s;
  long i, j, h, b;
};

// Evaluates a modifier at one score with slope[h] = 0.5 + h, bias[h, r] = 100·h + r and the scalar cap = 30 bound.
double at(const ScoreModifier& mod, const Point& p) {
  return evaluate(mod.tree(), [&](const ExprNode& leaf) -> double {
    if (leaf.op == ExprOp::Read) {
      std::vector<double> idx;
      for (const auto& a : leaf.args)
        idx.push_back(evaluate(a, [&](const ExprNode& l) {
          return static_cast<double>(l.name == "i" ? p.i : l.name == "j" ? p.j : l.name == "h" ? p.h : p.b);
        }));
      if (leaf.name == "slope") return 0.5 + idx[0];
      return 100 * idx[0] + idx[1];
    }
    if (leaf.name == "s") return p.s;
    if (leaf.name == "cap") return 30;
    return static_cast<double>(leaf.name == "i" ? p.i : leaf.name == "j" ? p.j : leaf.name == "h" ? p.h : p.b);
  });
}

TEST(ScoreModifier, TheIssuesExamplesComputeTheirFormulas) {
  const ScoreModifier alibi = ScoreModifier::parse("s - slope[h]*(i - j)");
  const ScoreModifier softcap = ScoreModifier::parse("cap*tanh(s/cap)");
  const ScoreModifier relative = ScoreModifier::parse("s + bias[h, i - j + 128]");
  const ScoreModifier window = ScoreModifier::parse("j < i - 256 ? -inf : s");
  for (double s : {-3.5, 0.0, 7.25})
    for (long i : {0L, 100L, 300L})
      for (long j : {0L, 40L, 299L})
        for (long h : {0L, 3L}) {
          const Point p{s, i, j, h, 1};
          EXPECT_DOUBLE_EQ(s - (0.5 + h) * static_cast<double>(i - j), at(alibi, p));
          EXPECT_DOUBLE_EQ(30 * std::tanh(s / 30), at(softcap, p));
          EXPECT_DOUBLE_EQ(s + 100.0 * h + static_cast<double>(i - j + 128), at(relative, p));
          EXPECT_EQ(j < i - 256 ? -INFINITY : s, at(window, p));
        }
  EXPECT_TRUE(alibi.reads_positions());
  EXPECT_FALSE(softcap.reads_positions());
  EXPECT_TRUE(window.can_mask());
  EXPECT_FALSE(relative.can_mask());
  EXPECT_EQ((std::vector<ScoreModifier::TensorUse>{{"slope", 1}}), alibi.tensors());
  EXPECT_EQ((std::vector<ScoreModifier::TensorUse>{{"bias", 2}}), relative.tensors());
  EXPECT_EQ((std::vector<std::string>{"cap"}), softcap.scalars());
  EXPECT_TRUE(ScoreModifier::identity().is_identity());
  EXPECT_FALSE(window.is_identity());
  // Index math stays integer: i - j + 128 is an Int expression.
  const Expr& read = relative.tree()->args[1];
  ASSERT_EQ(ExprOp::Read, read->op);
  EXPECT_EQ(ExprType::Int, read->args[1]->type);
}

TEST(ScoreModifier, CanonicalTextParsesBackToTheSameTree) {
  for (const char* text : {"s - slope[h]*(i - j)", "30*tanh(s/30)", "s + bias[h, i - j + 128]",
                           "j < i - 256 ? -inf : s", "(i >= j) ? s : -inf", "i == j ? 2*s : (j != 0 ? s : 0)",
                           "s*(i - j)/4", "max(s, -1e4)", "h <= 3 ? s + b : s - b"}) {
    const ScoreModifier m = ScoreModifier::parse(text);
    const ScoreModifier again = ScoreModifier::parse(m.text());
    EXPECT_TRUE(structurally_equal(m.tree(), again.tree())) << text << " -> " << m.text();
    EXPECT_EQ(m.text(), again.text());
  }
}

TEST(ScoreModifier, PrintsAsCuda) {
  const ScoreModifier window = ScoreModifier::parse("j < i - 256 ? -inf : s");
  const std::string code = print_cuda(window.tree(), [](const ExprNode& leaf) { return leaf.name; });
  EXPECT_EQ("((j < (i - 256LL)) ? (-__int_as_float(0x7f800000)) : s)", code);
  const ScoreModifier alibi = ScoreModifier::parse("s - slope[h]*(i - j)");
  const std::string alibi_code =
      print_cuda(alibi.tree(), [](const ExprNode& leaf) { return leaf.op == ExprOp::Read ? "slope_at_h" : leaf.name; });
  EXPECT_EQ("(s - (slope_at_h * static_cast<float>((i - j))))", alibi_code);
}

TEST(ScoreModifier, ErrorsPointAtTheColumn) {
  const auto column_of = [](const std::string& text, const std::string& needle) -> std::size_t {
    try {
      ScoreModifier::parse(text);
    } catch (const ScoreModifierError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_EQ(0u, std::string(e.what()).rfind("score_mod: column", 0)) << e.what();
      return e.column();
    }
    ADD_FAILURE() << "accepted " << text;
    return 0;
  };
  EXPECT_EQ(4u, column_of("s +", "expected a value but the text ended"));
  EXPECT_EQ(13u, column_of("s + bias[h, i/2]", "an index must be integer"));
  EXPECT_EQ(1u, column_of("i < j", "must be a value, not a condition"));
  EXPECT_EQ(7u, column_of("s < 1 < 2 ? s : 0", "comparisons do not chain"));
  EXPECT_EQ(1u, column_of("s[0]", "reserved"));
  EXPECT_EQ(1u, column_of("tanh + s", "needs arguments"));
  EXPECT_EQ(1u, column_of("s ? 1 : 0", "before '?' must be a comparison"));
  EXPECT_EQ(5u, column_of("s + (i < j)", "not a value"));
  EXPECT_THROW(ScoreModifier::parse("x[h] + x[h, i]"), InvalidArgument);
  EXPECT_THROW(ScoreModifier::parse("x + x[h]"), InvalidArgument);
}

TEST(Epilogue, ComparisonsAndSelect) {
  const Epilogue leaky = Epilogue::parse("acc > 0 ? acc : 0.1*acc");
  for (double acc : {-2.0, 0.0, 3.0})
    EXPECT_DOUBLE_EQ(acc > 0 ? acc : 0.1 * acc, evaluate(leaky.tree(), [&](const ExprNode&) { return acc; }));
  EXPECT_EQ("acc > 0 ? acc : 0.1*acc", leaky.text());
  EXPECT_THROW(Epilogue::parse("acc > 0"), EpilogueError);
  EXPECT_EQ("min(acc, inf)", Epilogue::parse("min(acc, inf)").text());
}

}  // namespace
}  // namespace tessera
