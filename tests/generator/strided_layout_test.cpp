// StridedLayout: classification of runtime strides, offsets evaluated against the strides' own arithmetic, the
// rank-2 case against Layout, names; SparseSignature's rules and JSON.
#include "generator/core/strided_layout.hpp"

#include <gtest/gtest.h>

#include <map>

#include "generator/core/error.hpp"
#include "generator/core/expr_eval.hpp"
#include "generator/core/sparse_format.hpp"
#include "generator/sparse/sparse_json.hpp"

namespace tessera {
namespace {

// Evaluates an offset with the coordinates and the tensor's runtime strides bound by name.
double eval(const Expr& e, const std::map<std::string, double>& vars) {
  return evaluate(e, [&](const ExprNode& leaf) { return vars.at(leaf.name); });
}

TEST(StridedLayout, ClassifiesStrides) {
  const std::int64_t bshd[] = {4096 * 8 * 64, 64, 8 * 64, 1};  // [b, h, s, d] over BSHD memory
  EXPECT_EQ("rrru", StridedLayout::of(bshd).name());
  const std::int64_t broadcast_heads[] = {2048 * 64, 0, 64, 1};  // one K head for all query heads (MQA)
  EXPECT_EQ("rbru", StridedLayout::of(broadcast_heads).name());
  const std::int64_t two_units[] = {1, 1};  // only the innermost unit stride is the contiguous one
  EXPECT_EQ("ru", StridedLayout::of(two_units).name());
  const std::int64_t none[] = {3, 7};
  EXPECT_FALSE(StridedLayout::of(none).contiguous_dim());
  EXPECT_EQ(3u, StridedLayout::of(bshd).contiguous_dim());
  EXPECT_EQ("rru", StridedLayout::dense(3).name());
}

TEST(StridedLayout, OffsetIsTheDotOfCoordinatesAndStrides) {
  const std::int64_t strides[] = {98304, 64, 512, 1};  // BSHD: b, h, s, d
  const StridedLayout l = StridedLayout::of(strides);
  const Expr coords[] = {var("b", ExprType::Int), var("h", ExprType::Int), var("i", ExprType::Int),
                         var("d", ExprType::Int)};
  const Expr offset = l.offset("q", coords);
  for (int b : {0, 3})
    for (int h : {0, 5})
      for (int i : {0, 17, 191})
        for (int d : {0, 63}) {
          const std::map<std::string, double> vars{{"b", b},        {"h", h},     {"i", i},     {"d", d},
                                                   {"q.s0", 98304}, {"q.s1", 64}, {"q.s2", 512}};
          EXPECT_EQ(b * 98304.0 + h * 64.0 + i * 512.0 + d, eval(offset, vars));
        }
  EXPECT_THROW(l.offset("q", std::span<const Expr>(coords, 3)), std::invalid_argument);
}

TEST(StridedLayout, MatrixCaseMatchesLayout) {
  const Expr row = var("r", ExprType::Int), col = var("c", ExprType::Int), zero = int_constant(0);
  for (const Layout& layout : {Layout::row_major(), Layout::col_major(), Layout::strided()}) {
    const StridedLayout l = StridedLayout::of_matrix(layout);
    const Expr coords[] = {row, col};
    const std::map<std::string, double> vars{{"r", 5},    {"c", 9},      {"t.rs", 100}, {"t.cs", 7},
                                             {"t.bs", 0}, {"t.s0", 100}, {"t.s1", 7}};
    EXPECT_EQ(eval(layout.offset("t", row, col, zero), vars), eval(l.offset("t", coords), vars)) << layout.name();
  }
  EXPECT_THROW(StridedLayout::of_matrix(Layout::zero()), std::invalid_argument);
}

TEST(StridedLayout, NamesRoundTrip) {
  for (const char* name : {"", "u", "rrru", "rbru", "urr", "bb"}) {
    const auto parsed = StridedLayout::parse(name);
    ASSERT_TRUE(parsed) << name;
    EXPECT_EQ(name, parsed->name());
  }
  EXPECT_FALSE(StridedLayout::parse("ruu"));  // two contiguous dimensions
  EXPECT_FALSE(StridedLayout::parse("rx"));
}

TEST(SparseSignature, RulesAndJson) {
  SparseSignature csr;
  EXPECT_EQ("csr_i32_f32", csr.tag());
  EXPECT_EQ(csr, from_json<SparseSignature>(to_json(csr)));
  SparseSignature bsr{SparseFormat::Bsr, 4, 8, 64, DType::bf16};
  EXPECT_EQ("bsr4x8_i64_bf16", bsr.tag());
  EXPECT_EQ(bsr, from_json<SparseSignature>(to_json(bsr)));
  const auto rejected = [](SparseSignature s, const std::string& needle) {
    try {
      s.check();
      ADD_FAILURE() << "accepted " << s.tag();
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  rejected({SparseFormat::Csr, 2, 2, 32, DType::f32}, "CSR has 1x1 blocks");
  rejected({SparseFormat::Bsr, 0, 4, 32, DType::f32}, "sides must be in 1..64");
  rejected({SparseFormat::Bsr, 4, 128, 32, DType::f32}, "sides must be in 1..64");
  rejected({SparseFormat::Csr, 1, 1, 16, DType::f32}, "must be i32 or i64");
  rejected({SparseFormat::Csr, 1, 1, 32, DType::i32}, "must be f32, bf16 or f16");
  EXPECT_THROW(from_json<SparseSignature>({{"format", "coo"}}), InvalidArgument);
  EXPECT_THROW(from_json<SparseSignature>({{"format", "csr"}}), InvalidArgument);  // malformed: no block
}

}  // namespace
}  // namespace tessera
