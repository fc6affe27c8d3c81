// The epilogue language: what parses, its canonical text, and errors that point at the column.
#include <gtest/gtest.h>

#include "generator/attention/score_modifier.hpp"
#include "generator/core/epilogue.hpp"
#include "generator/core/error.hpp"
#include "generator/core/expr_eval.hpp"

namespace tessera {
namespace {

TEST(EpilogueParser, CanonicalTextOfValidForms) {
  const std::pair<const char*, const char*> cases[] = {
      {"alpha*acc+beta*c", "alpha*acc + beta*c"},
      {"gelu( alpha * acc + bias[n] )", "gelu(alpha*acc + bias[n])"},
      {"silu(acc)*scale[m] + residual[m, n]", "silu(acc)*scale[m] + residual[m,n]"},
      {"clamp(acc, -1, 6.5)", "clamp(acc, -1, 6.5)"},
      {"acc - (c - beta)", "acc - (c - beta)"},
      {"(acc - c) - beta", "acc - c - beta"},
      {"acc / (2 * alpha)", "acc/(2*alpha)"},
      {"-(acc + 1)", "-(acc + 1)"},
      {"+acc", "acc"},
      {"1e-3*acc", "0.001*acc"},
      {"max(min(acc, 1.5E2), .25)", "max(min(acc, 150), 0.25)"},
      {"relu(gelu_tanh(tanh(sigmoid(exp(abs(acc))))))", "relu(gelu_tanh(tanh(sigmoid(exp(abs(acc))))))"},
  };
  for (const auto& [text, canonical] : cases) {
    const Epilogue e = Epilogue::parse(text);
    EXPECT_EQ(e.text(), canonical) << text;
    // The canonical text parses back to the same tree.
    EXPECT_TRUE(structurally_equal(Epilogue::parse(e.text()).tree(), e.tree())) << text;
  }
}

TEST(EpilogueParser, PrecedenceAndAssociativity) {
  const auto value = [](const char* text) {
    return evaluate(Epilogue::parse(text).tree(), [](const ExprNode& leaf) {
      if (leaf.name == "acc") return 8.0;
      if (leaf.name == "c") return 4.0;
      return 2.0;  // alpha, beta
    });
  };
  EXPECT_DOUBLE_EQ(value("acc - c - beta"), 2.0);
  EXPECT_DOUBLE_EQ(value("acc / c / beta"), 1.0);
  EXPECT_DOUBLE_EQ(value("acc - c * beta"), 0.0);
  EXPECT_DOUBLE_EQ(value("-acc * -c"), 32.0);
  EXPECT_DOUBLE_EQ(value("clamp(acc, 0, 6)"), 6.0);
  EXPECT_DOUBLE_EQ(value("min(acc, c) + max(acc, c)"), 12.0);
}

TEST(EpilogueParser, FindsTensorsAndScalars) {
  const Epilogue e = Epilogue::parse("gelu(alpha*acc + bias[n]) * scale[m] + residual[m,n] + bias[n]");
  ASSERT_EQ(e.tensors().size(), 3u);
  EXPECT_EQ(e.tensors()[0], (EpilogueTensor{"bias", IndexForm::N}));
  EXPECT_EQ(e.tensors()[1], (EpilogueTensor{"residual", IndexForm::MN}));
  EXPECT_EQ(e.tensors()[2], (EpilogueTensor{"scale", IndexForm::M}));
  EXPECT_TRUE(e.reads_alpha());
  EXPECT_FALSE(e.reads_beta());
  EXPECT_FALSE(e.reads_c());

  const Epilogue d = Epilogue::linear_combination();
  EXPECT_TRUE(d.reads_c());
  EXPECT_TRUE(d.c_scaled_by_beta());
  EXPECT_TRUE(Epilogue::parse("relu(acc + c*beta)").c_scaled_by_beta());
  EXPECT_FALSE(Epilogue::parse("acc + c").c_scaled_by_beta());
  EXPECT_FALSE(Epilogue::parse("beta*acc + c").c_scaled_by_beta());
  EXPECT_FALSE(Epilogue::parse("acc").c_scaled_by_beta());
}

struct BadText {
  const char* text;
  std::size_t column;
  const char* message;
};

TEST(EpilogueParser, InvalidTextReportsItsColumn) {
  const BadText cases[] = {
      {"", 1, "empty expression"},
      {"   ", 4, "empty expression"},
      {"gelu(acc", 9, "expected ')'"},
      {"acc + ", 7, "expected a value"},
      {"acc $ c", 5, "unexpected '$'"},
      {"foo + acc", 1, "unknown name 'foo'"},
      {"acc + gelu", 7, "needs arguments"},
      {"softmax(acc)", 1, "unknown function 'softmax'"},
      {"gelu(acc, c)", 1, "takes 1 argument, got 2"},
      {"clamp(acc, 1)", 1, "takes 3 arguments, got 2"},
      {"acc + bias[k]", 12, "index must be m or n"},
      {"acc + bias[n,m]", 7, "must be indexed [m], [n] or [m,n]"},
      {"acc + bias[]", 12, "expected index m or n"},
      {"c[m,n] + acc", 1, "reserved"},
      {"gelu[n]", 1, "reserved"},
      {"acc + m", 7, "may only appear inside"},
      {"1.2.3 * acc", 1, "malformed number"},
      {"1e999 * acc", 1, "out of f32 range"},
      {"acc)", 4, "unexpected ')'"},
      {"acc acc", 5, "unexpected 'a'"},
  };
  for (const auto& bad : cases) {
    try {
      Epilogue::parse(bad.text);
      ADD_FAILURE() << "accepted: '" << bad.text << "'";
    } catch (const EpilogueError& e) {
      EXPECT_EQ(e.column(), bad.column) << bad.text << " → " << e.what();
      EXPECT_NE(std::string(e.what()).find(bad.message), std::string::npos) << bad.text << " → " << e.what();
      // The message shows the text with a caret under the column.
      const std::string caret = std::string(bad.column - 1, ' ') + "^";
      EXPECT_NE(std::string(e.what()).find("\n  " + caret), std::string::npos) << e.what();
    }
  }
}

TEST(EpilogueParser, RejectsInconsistentIndexingAndDeepNesting) {
  EXPECT_THROW(Epilogue::parse("x[n] + x[m]"), InvalidArgument);
  EXPECT_THROW(Epilogue::parse(std::string(5000, '(') + "acc" + std::string(5000, ')')), EpilogueError);
  EXPECT_THROW(Epilogue::parse(std::string(5000, '-') + "acc"), EpilogueError);
  EXPECT_NO_THROW(Epilogue::parse(std::string(50, '(') + "acc" + std::string(50, ')')));
}

// Long flat texts and big trees: refused with a clear error before any recursive printer or visitor walks them (a
// 300,000-character product overflowed the stack in the printer).
TEST(EpilogueParser, RefusesTextsAndTreesTooLongToWalk) {
  std::string flat = "acc";
  while (flat.size() < 300000) flat += "*acc";
  try {
    Epilogue::parse(flat);
    ADD_FAILURE() << "accepted a 300,000-character epilogue";
  } catch (const EpilogueError& e) {
    EXPECT_NE(std::string(e.what()).find("expression too long"), std::string::npos);
  }
  std::string sum = "s";
  while (sum.size() < 300000) sum += "+s";
  EXPECT_THROW(ScoreModifier::parse(sum), ScoreModifierError);
  std::string fine = "acc";
  for (int i = 0; i < 1000; ++i) fine += "+acc";
  EXPECT_NO_THROW(Epilogue::parse(fine));
  Expr chain = var("acc");
  for (int i = 0; i < 20000; ++i) chain = chain + var("acc");
  EXPECT_THROW(Epilogue::from_tree(chain), InvalidArgument);
}

TEST(EpilogueParser, TreesBuiltInCodeFollowTheSameRules) {
  const Epilogue e = Epilogue::from_tree(call(ExprOp::Relu, {var("acc") + read("bias", {var("n", ExprType::Int)})}));
  EXPECT_EQ(e.text(), "relu(acc + bias[n])");
  EXPECT_THROW(Epilogue::from_tree(var("accumulator")), EpilogueError);
  EXPECT_THROW(Epilogue::from_tree(nullptr), InvalidArgument);
}

// A tree built through the C++ operators is as deep as the caller makes it: releasing it must not take a stack frame
// per level (a million levels overflowed the stack when each node released its children recursively), and a subtree
// another owner still holds must survive the release of the tree around it.
TEST(Expr, DeepTreesAreReleasedWithoutRecursion) {
  Expr chain = var("acc");
  Expr middle;
  constexpr int kLevels = 1000000;
  for (int i = 0; i < kLevels; ++i) {
    chain = chain + var("acc");
    if (i == kLevels / 2) middle = chain;
  }
  chain.reset();
  ASSERT_EQ(middle.use_count(), 1);
  int depth = 0;
  for (const ExprNode* n = middle.get(); n->op == ExprOp::Add; n = n->args[0].get()) {
    ASSERT_EQ(n->args.size(), 2u);
    EXPECT_EQ(n->args[1]->name, "acc");
    ++depth;
  }
  EXPECT_EQ(depth, kLevels / 2 + 1);
  middle.reset();
}

}  // namespace
}  // namespace tessera
