// Bad input to every public argument: a tessera::Error naming the argument and the rule, and nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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
