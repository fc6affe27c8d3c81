// Bad input to every public argument: a tessera::Error naming the argument and the rule, and nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <limits>

#include "tessera/reference.hpp"
#include "tests/test_util.hpp"

namespace tessera {
namespace {

using test::Matrix;

// A valid 6×5×4 problem whose arguments each test breaks in one way.
struct Fixture {
  Matrix a{1, 6, 4, Layout::row_major()}, b{1, 4, 5, Layout::row_major()}, c{1, 6, 5, Layout::row_major()},
      d{1, 6, 5, Layout::row_major()};
  std::vector<float> bias = std::vector<float>(5, 1.0f), scale = std::vector<float>(6, 1.0f);
  GemmArgs args;

  Fixture() {
    std::mt19937 rng(1);
    for (Matrix* m : {&a, &b, &c}) m->fill_integers(rng);
    d.fill(-7.0f);
    args.a = a.view;
    args.b = b.view;
    args.c = c.view;
    args.d = d.view;
    args.beta = 1;
  }
  bool d_untouched() {
    bool same = true;
    d.each([&](float& x) { same &= x == -7.0f; });
    return same;
  }
};

// Runs gemm and returns the error message; fails the test if no tessera::Error (of type E) was thrown.
template <class E = InvalidArgument>
std::string error_of(Runtime& runtime, const GemmArgs& args) {
  try {
    runtime.gemm(args);
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted bad input";
  return {};
}

Runtime& shared_runtime() {
  static Runtime runtime;
  return runtime;
}

#define EXPECT_REJECTED(expected, ...)                                              \
  do {                                                                              \
    Fixture f;                                                                      \
    GemmArgs& g = f.args;                                                           \
    __VA_ARGS__;                                                                    \
    const std::string message = error_of(shared_runtime(), g);                      \
    EXPECT_NE(message.find(expected), std::string::npos) << "message: " << message; \
    EXPECT_TRUE(f.d_untouched()) << "a rejected call wrote to d";                   \
  } while (0)

TEST(BadInput, ValidFixtureRuns) {
  Fixture f;
  EXPECT_NO_THROW(shared_runtime().gemm(f.args));
  EXPECT_FALSE(f.d_untouched());
}

TEST(BadInput, MissingAndNullTensors) {
  EXPECT_REJECTED("a: is required", g.a = Tensor{});
  EXPECT_REJECTED("d: is required", g.d = Tensor{});
  EXPECT_REJECTED("b: data is null", g.b.data = nullptr);
  EXPECT_REJECTED("c: the epilogue reads c, but no c tensor was given", g.c = Tensor{});
}

TEST(BadInput, Shapes) {
  EXPECT_REJECTED("b: has 3 rows, but a has K = 4 columns", g.b.shape[0] = 3);
  EXPECT_REJECTED("d: is 6x4, the product is 6x5", g.d.shape[1] = 4);
  EXPECT_REJECTED("c: is 5x5, the output is 6x5", g.c.shape[0] = 5);
  EXPECT_REJECTED("a: shape[0] = -6 is negative", g.a.shape[0] = -6);
  EXPECT_REJECTED("a: must be 2-D [rows, cols] or 3-D [batch, rows, cols], got 1-D",
                  (g.a.shape = {6}, g.a.strides = {1}));
  EXPECT_REJECTED("a: has 2 dimensions but 1 strides", g.a.strides = {4});
  EXPECT_REJECTED("got 4-D", (g.a.shape = {1, 2, 3, 4}, g.a.strides = {24, 12, 4, 1}));
}

TEST(BadInput, StridesAndLeadingDimensions) {
  EXPECT_REJECTED("a: row-major leading dimension 3 is less than the 4 columns",
                  g.a.strides = std::vector<std::int64_t>{3, 1});
  EXPECT_REJECTED("b: column-major leading dimension 2 is less than the 4 rows",
                  g.b.strides = std::vector<std::int64_t>{1, 2});
  EXPECT_REJECTED("b: strides[1] = -1 is negative", g.b.strides[1] = -1);
  EXPECT_REJECTED("d: must be row-major (strides [ld >= 5, 1]) or column-major",
                  g.d.strides = std::vector<std::int64_t>{10, 2});
  EXPECT_REJECTED("a: spans more than 2^60 elements", g.a.strides[0] = std::int64_t{1} << 62);
}

TEST(BadInput, BatchesAndOverlaps) {
  Matrix a3(3, 6, 4, Layout::row_major(), 0, true), d3(3, 6, 5, Layout::row_major(), 0, true);
  EXPECT_REJECTED("d: must be 3-D [batch, M, N] when a or b is batched", g.a = a3.view);
  EXPECT_REJECTED("a: has batch 3, d has batch 2", (g.a = a3.view, g.d = d3.view, g.d.shape[0] = 2));
  EXPECT_REJECTED("d: batch stride 7 makes batches overlap",
                  (g.a = a3.view, g.d = d3.view, g.c = Tensor{}, g.beta = 0, g.d.strides[0] = 7));
  EXPECT_REJECTED("", g.d = g.a);  // shape mismatch or overlap, either way rejected
  EXPECT_REJECTED("d: overlaps a",
                  (g.d.data = static_cast<float*>(g.a.data) + 2, g.d.shape = {6, 5}, g.a.shape = {6, 4}));
  EXPECT_REJECTED("d: partly overlaps c", (g.c.data = static_cast<float*>(g.d.data) + 1));
}

TEST(BadInput, EpilogueInputs) {
  EXPECT_REJECTED("inputs.bias: the epilogue reads bias but no tensor was bound to it",
                  g.set_epilogue("acc + bias[n]"));
  EXPECT_REJECTED("inputs.bias: has 4 elements, the output has N = 5",
                  (g.set_epilogue("acc + bias[n]"), g.inputs["bias"] = Tensor::vector(f.bias.data(), 4)));
  EXPECT_REJECTED("inputs.scale: has 5 elements, the output has M = 6",
                  (g.set_epilogue("acc * scale[m]"), g.inputs["scale"] = Tensor::vector(f.scale.data(), 5)));
  EXPECT_REJECTED("inputs.bias: is not read by the epilogue 'acc'",
                  (g.set_epilogue("acc"), g.inputs["bias"] = Tensor::vector(f.bias.data(), 5)));
  EXPECT_REJECTED("inputs.r: must be 2-D [rows, cols]",
                  (g.set_epilogue("acc + r[m,n]"), g.inputs["r"] = Tensor::vector(f.bias.data(), 5)));
  EXPECT_REJECTED("inputs.r: is 6x4, the output is 6x5", (g.set_epilogue("acc + r[m,n]"), g.inputs["r"] = g.a));
  EXPECT_REJECTED("d: overlaps inputs.bias", (g.set_epilogue("acc + bias[n]"),
                                              g.inputs["bias"] = Tensor::vector(static_cast<float*>(g.d.data), 5)));
}

TEST(BadInput, EpilogueTextAndDtypes) {
  EXPECT_THROW(GemmArgs().set_epilogue("gelu(acc"), EpilogueError);
  {
    Fixture f;
    f.args.a.dtype = DType::f16;
    EXPECT_THROW(shared_runtime().gemm(f.args), ConfigError);
    EXPECT_TRUE(f.d_untouched());
  }
}

TEST(BadInput, RuntimeAndKernelArguments) {
  EXPECT_THROW(Runtime({"gpu", 0, 0}), InvalidArgument);
  EXPECT_THROW(Runtime({"cpu", -1, 0}), InvalidArgument);
  EXPECT_THROW(Runtime({"cpu", 0, 1}), InvalidArgument);
  Fixture f;
  f.args.threads = -2;
  EXPECT_THROW(shared_runtime().gemm(f.args), InvalidArgument);
  EXPECT_TRUE(f.d_untouched());

  // A kernel refuses arguments of another signature.
  Fixture other;
  const GemmKernel kernel = shared_runtime().compile(shared_runtime().describe(other.args));
  other.args.b = Matrix(1, 4, 5, Layout::col_major()).view;
  Matrix bcol(1, 4, 5, Layout::col_major());
  other.args.b = bcol.view;
  try {
    kernel.run(other.args);
    ADD_FAILURE() << "ran with a different signature";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("different signature"), std::string::npos);
  }
  EXPECT_TRUE(other.d_untouched());

  // A kernel specialised for 6x5x4 (small shapes compile their sizes in) refuses other sizes.
  EXPECT_TRUE(kernel.spec().config.fixed());
  Fixture bigger;
  Matrix a7(1, 7, 4, Layout::row_major()), c7(1, 7, 5, Layout::row_major()), d7(1, 7, 5, Layout::row_major());
  bigger.args.a = a7.view;
  bigger.args.c = c7.view;
  bigger.args.d = d7.view;
  try {
    kernel.run(bigger.args);
    ADD_FAILURE() << "a fixed-size kernel ran other sizes";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("specialised for 6x5x4"), std::string::npos) << e.what();
  }

  // An impossible config is a ConfigError before anything is generated.
  CpuGemmConfig bad;
  bad.mr = 40;
  EXPECT_THROW(shared_runtime().compile(GemmProblem{}, bad), ConfigError);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// Problems handed to compile and choose_config directly are validated too (issue 37, item 6): negative and huge
// extents are refused with the extent's name, never compiled or divided by.
TEST(BadInput, ProblemExtentsGivenDirectly) {
  Runtime& rt = shared_runtime();
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max();
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, std::int64_t>>{{"m", -5},
                                                         {"n", -1},
                                                         {"k", -2},
                                                         {"batch", -3},
                                                         {"m", huge},
                                                         {"k", huge},
                                                         {"batch", std::int64_t{1} << 41}}) {
    GemmProblem p;
    p.m = p.n = p.k = 8;
    (field == "m" ? p.m : field == "n" ? p.n : field == "k" ? p.k : p.batch) = value;
    for (int entry = 0; entry < 2; ++entry) {
      try {
        if (entry == 0)
          rt.compile(p);
        else
          rt.compile(p, CpuGemmConfig::default_for(with_nonempty_output(GemmProblem{}), rt.target()));
        ADD_FAILURE() << field << " = " << value << " accepted";
      } catch (const InvalidArgument& e) {
        EXPECT_EQ(e.argument(), field) << e.what();
      }
    }
  }
  GemmProblem wide;  // each extent allowed, the operand too large
  wide.m = wide.n = std::int64_t{1} << 32, wide.k = 8;
  EXPECT_THROW(rt.choose_config(wide), InvalidArgument);
}

// A DType value outside the enumeration (a cast from a bad integer) is an Error naming dtype, not std::bad_alloc.
TEST(BadInput, OutOfRangeDType) {
  EXPECT_THROW(dtype_info(static_cast<DType>(42)), InvalidArgument);
  Fixture f;
  f.args.a.dtype = static_cast<DType>(200);
  try {
    shared_runtime().gemm(f.args);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dtype"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(f.d_untouched());
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The GEMM bad-input matrix (issue 37): every operand broken each way a caller can break it, each row ending in a
// tessera::Error whose message holds the expected text, with D untouched. A signal fails the test (gtest runs each
// TEST in its own process under ctest).
struct OperandBreak {
  const char* what;
  std::string expected;  // "{}" stands for the operand's name
  std::function<void(Tensor&)> breaks;
  std::string valid_for = "";  // operands for which the change is legal (general strides, broadcasting)
};

std::string named(std::string text, const std::string& operand) {
  const std::size_t at = text.find("{}");
  if (at != std::string::npos) text.replace(at, 2, operand);
  return text;
}

TEST(BadInput, EveryOperandBrokenEveryWay) {
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max();
  const std::vector<OperandBreak> breaks{
      {"negative rows", "{}: shape[0] = -1 is negative", [](Tensor& t) { t.shape[0] = -1; }},
      {"negative columns", "{}: shape[1] = -3 is negative", [](Tensor& t) { t.shape[1] = -3; }},
      {"most negative rows", "is negative", [](Tensor& t) { t.shape[0] = std::numeric_limits<std::int64_t>::min(); }},
      {"rank 1", "{}: must be 2-D [rows, cols] or 3-D", [](Tensor& t) { t.shape = {6}, t.strides = {1}; }},
      {"rank 0", "{}: must be 2-D", [](Tensor& t) { t.shape = {}, t.strides = {}; }},
      {"rank 5", "{}: must be 2-D",
       [](Tensor& t) {
         t.shape = {1, 1, 1, 2, 2}, t.strides = {4, 4, 4, 2, 1};
       }},
      {"one stride short", "{}: has 2 dimensions but 1 strides", [](Tensor& t) { t.strides.pop_back(); }},
      {"one stride extra", "{}: has 2 dimensions but 3 strides", [](Tensor& t) { t.strides.push_back(1); }},
      {"negative row stride", "{}: strides[0] = -8 is negative", [](Tensor& t) { t.strides[0] = -8; }},
      {"negative column stride", "{}: strides[1] = -1 is negative", [](Tensor& t) { t.strides[1] = -1; }},
      {"stride past 2^60", "{}: spans more than 2^60 elements",
       [](Tensor& t) { t.strides[0] = std::int64_t{1} << 61; }},
      {"stride int64 max", "{}: spans more than 2^60", [huge](Tensor& t) { t.strides[0] = huge; }},
      {"rows int64 max", "{}:", [huge](Tensor& t) { t.shape[0] = huge; }},
      {"short leading dimension", "{}: row-major leading dimension 1 is less than",
       [](Tensor& t) { t.strides[0] = 1, t.strides[1] = 1; }},
      {"neither layout", "{}: must be row-major (strides [ld >=", [](Tensor& t) { t.strides[1] = 2; }, "abc"},
      {"both strides zero", "{}: row-major leading dimension 0",
       [](Tensor& t) {
         t.strides = {0, 1};
       }},
      {"null data", "{}: data is null", [](Tensor& t) { t.data = nullptr; }},
      {"dtype out of range", "dtype", [](Tensor& t) { t.dtype = static_cast<DType>(99); }},
      {"dtype i8 beside f32", "", [](Tensor& t) { t.dtype = DType::i8; }, "d"},
      {"dtype f16 on the CPU", "", [](Tensor& t) { t.dtype = DType::f16; }},
      {"batch of 2 beside unbatched", "",
       [](Tensor& t) {
         t.shape.insert(t.shape.begin(), 2);
         t.strides.insert(t.strides.begin(), 64);
       },
       "d"},
      {"negative batch", "{}: shape[0] = -2 is negative",
       [](Tensor& t) {
         t.shape.insert(t.shape.begin(), -2);
         t.strides.insert(t.strides.begin(), 64);
       }},
      {"negative batch stride", "{}: strides[0] = -64 is negative",
       [](Tensor& t) {
         t.shape.insert(t.shape.begin(), 2);
         t.strides.insert(t.strides.begin(), -64);
       }},
  };
  const std::vector<std::pair<std::string, Tensor GemmArgs::*>> operands{
      {"a", &GemmArgs::a}, {"b", &GemmArgs::b}, {"c", &GemmArgs::c}, {"d", &GemmArgs::d}};
  int cases = 0;
  for (const auto& [name, member] : operands)
    for (const OperandBreak& br : breaks) {
      if (br.valid_for.find(name) != std::string::npos) continue;
      SCOPED_TRACE(name + ": " + br.what);
      Fixture f;
      br.breaks(f.args.*member);
      try {
        shared_runtime().gemm(f.args);
        ADD_FAILURE() << "accepted";
      } catch (const Error& e) {
        const std::string expected = named(br.expected, name);
        EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
            << "message: " << e.what() << "\nexpected: " << expected;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "not a tessera::Error: " << e.what();
      }
      EXPECT_TRUE(f.d_untouched()) << "a rejected call wrote to d";
      ++cases;
    }
  std::cout << cases << " cases\n";
}

// Epilogue text that cannot be a GEMM epilogue: refused where it is parsed (EpilogueError with a column inside the
// text) or, for names the text binds to nothing, when the call is made (InvalidArgument naming them).
TEST(BadInput, EpilogueTexts) {
  std::string deep(20000, '(');
  deep += "acc" + std::string(20000, ')');
  const std::vector<std::string> unparsable{"",
                                            " ",
                                            "\t\n",
                                            "acc +",
                                            "+",
                                            "* acc",
                                            "acc acc",
                                            "(acc",
                                            "acc)",
                                            "((acc)",
                                            "relu(acc",
                                            "relu()",
                                            "relu(acc, acc)",
                                            "max(acc)",
                                            "max(acc, 1, 2)",
                                            "foo(acc)",
                                            "gelu",
                                            "acc + foo",
                                            "bias[]",
                                            "bias[n",
                                            "bias[q]",
                                            "bias[m, n, k]",
                                            "bias[n][m]",
                                            "acc[n]",
                                            "c[n]",
                                            "acc ** 2",
                                            "acc +* 2",
                                            "acc , 1",
                                            "acc;",
                                            "acc # x",
                                            "acc @ b",
                                            "acc > 0",
                                            "acc > 0 ? acc",
                                            "acc ? : 1",
                                            "1..2 * acc",
                                            "acc × 2",
                                            "acc + ñ",
                                            "\"acc\"",
                                            "acc + 'x'",
                                            std::string("acc\0 + 1", 8),
                                            "acc\x01",
                                            "acc + 1e",
                                            "acc + .",
                                            "acc + 1e+",
                                            "acc + -",
                                            "tanh(acc",
                                            "select(acc, 1)",
                                            "acc == 1",
                                            "!acc",
                                            "m",
                                            "acc + m + k",
                                            "acc + alpha[n]",
                                            deep};
  int cases = 0;
  for (const std::string& text : unparsable) {
    SCOPED_TRACE("epilogue '" + text.substr(0, 40) + "'");
    try {
      Fixture f;
      f.args.set_epilogue(text);
      shared_runtime().gemm(f.args);
      ADD_FAILURE() << "accepted";
    } catch (const EpilogueError& e) {
      EXPECT_GE(e.column(), 1u) << e.what();
      EXPECT_LE(e.column(), text.size() + 1) << e.what();
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("epilogue"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not an epilogue error: " << e.what();
    }
    ++cases;
  }
  // Names bound to nothing are found when the call is made.
  for (const char* text : {"acc + bias[n]", "acc * scale[m]", "acc + r[m, n]", "acc + c + t[n]"}) {
    SCOPED_TRACE(text);
    Fixture f;
    f.args.set_epilogue(text);
    try {
      shared_runtime().gemm(f.args);
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("no tensor was bound"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(f.d_untouched());
    ++cases;
  }
  std::cout << cases << " cases\n";
}

// Each RuntimeOptions setting crossed with each non-default signature (the tuner's operands, the cache, the cost
// models, the thread pool, the IR pipeline): every call gives the reference's result.
TEST(BadInput, RuntimeOptionsCrossedWithSignatures) {
  struct Option {
    const char* what;
    std::function<void(RuntimeOptions&)> set;
  };
  const std::vector<Option> options{
      {"default", [](RuntimeOptions&) {}},
      {"threads 1", [](RuntimeOptions& o) { o.threads = 1; }},
      {"threads 3", [](RuntimeOptions& o) { o.threads = 3; }},
      {"tuning budget 1", [](RuntimeOptions& o) { o.tuning_budget = 1; }},
      {"tuning budget 3", [](RuntimeOptions& o) { o.tuning_budget = 3; }},
      {"analytic model", [](RuntimeOptions& o) { o.cost_model = "analytic"; }},
      {"heuristic", [](RuntimeOptions& o) { o.cost_model = "heuristic"; }},
      {"no disk cache", [](RuntimeOptions& o) { o.disk_cache = false; }},
      {"IR pipeline O2", [](RuntimeOptions& o) { o.ir_opt_level = 2; }},
      {"IR pipeline O3", [](RuntimeOptions& o) { o.ir_opt_level = 3; }},
      {"workers unpinned", [](RuntimeOptions& o) { o.pin_workers = false; }},
      {"AVX2", [](RuntimeOptions& o) { o.target = "cpu:avx2"; }},
  };
  struct Signature {
    const char* what;
    std::int64_t batch, m, n, k;
    Layout a, b;
    const char* epilogue;
    float alpha, beta;
  };
  const Layout row = Layout::row_major(), col = Layout::col_major();
  const std::vector<Signature> signatures{
      {"relu", 1, 37, 29, 23, row, row, "relu(acc)", 1, 0},
      {"bias", 1, 19, 41, 17, row, col, "acc + bias[n]", 1, 0},
      {"alpha and beta with c", 1, 33, 18, 27, col, row, "alpha * acc + beta * c", 2, 0.5f},
      {"row scale and a residual", 1, 21, 35, 30, row, row, "gelu(scale[m] * acc) + r[m, n]", 1, 0},
      {"batched, both column-major", 3, 17, 23, 19, col, col, "acc", 1, 0},
      {"one element, NaN alpha", 1, 1, 1, 1, row, row, "alpha * acc", std::nanf(""), 0},
  };
  int cases = 0;
  for (const Option& option : options) {
    RuntimeOptions o;
    option.set(o);
    Runtime rt(o);
    for (const Signature& s : signatures) {
      SCOPED_TRACE(std::string(option.what) + " × " + s.what);
      std::mt19937 rng(static_cast<unsigned>(cases));
      Matrix a(s.batch, s.m, s.k, s.a), b(s.batch, s.k, s.n, s.b), c(s.batch, s.m, s.n, row), d(s.batch, s.m, s.n, row),
          r(1, s.m, s.n, row);
      for (Matrix* x : {&a, &b, &c, &r}) x->fill_uniform(rng);
      d.fill(-7);
      std::vector<float> bias(static_cast<std::size_t>(s.n), 0.25f), scale(static_cast<std::size_t>(s.m), 1.5f);
      GemmArgs g;
      g.a = a.view, g.b = b.view, g.d = d.view;
      g.alpha = s.alpha, g.beta = s.beta;
      g.set_epilogue(s.epilogue);
      const std::string text = s.epilogue;
      if (text.find("beta * c") != std::string::npos) g.c = c.view;
      if (text.find("bias") != std::string::npos) g.inputs["bias"] = Tensor::vector(bias.data(), s.n);
      if (text.find("scale") != std::string::npos) g.inputs["scale"] = Tensor::vector(scale.data(), s.m);
      if (text.find("r[m, n]") != std::string::npos) g.inputs["r"] = r.view;
      const GemmReference ref = reference_gemm(g);
      try {
        rt.gemm(g);
        const Comparison cmp = compare_gemm(ref, g.d);
        EXPECT_TRUE(cmp.ok()) << cmp.first_mismatch;
      } catch (const Error& e) {
        ADD_FAILURE() << e.what();
      }
      ++cases;
    }
  }
  std::cout << cases << " cases\n";
}

}  // namespace
}  // namespace tessera
