// emit_cuda's pieces that can be checked as text: float literals, the epilogue as CUDA C, the kernel's constants.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "generator/core/dtype.hpp"
#include "generator/cuda/expr_cuda.hpp"
#include "generator/cuda/gemm_source.hpp"

namespace tessera {
namespace {

TEST(CudaPrinter, FloatLiteralsReadBackAsTheSameFloat) {
  for (double v : {0.0, 1.0, -2.5, 0.1, 1e-7, 3.4028234663852886e38, 1.17549435e-38, 0.044715, 123456789.0}) {
    const std::string text = cuda_float_literal(v);
    ASSERT_EQ(text.front(), '(') << text;
    ASSERT_TRUE(text.ends_with("f)")) << text;
    const float back = std::strtof(text.substr(1, text.size() - 3).c_str(), nullptr);
    EXPECT_EQ(back, static_cast<float>(v)) << text;
  }
  EXPECT_EQ(cuda_float_literal(std::numeric_limits<double>::infinity()), "__int_as_float(0x7f800000)");
}

TEST(CudaPrinter, EpilogueBecomesCudaCWithLayoutsFromExpr) {
  GemmSignature s;
  s.a = s.b = {DType::f16, Layout::row_major()};
  s.c = {DType::f32, Layout::col_major()};
  s.d = {DType::f32, Layout::col_major()};
  s.epilogue = Epilogue::parse("clamp(gelu(alpha*acc + bias[n]) * scale[m] + beta*c, -1, 1)");
  s.inputs = {{"bias", IndexForm::N, {DType::f32, Layout::row_major()}},
              {"scale", IndexForm::M, {DType::f32, Layout::col_major()}}};
  const CudaTarget t = CudaTarget::parse("cuda:sm_80");
  GemmProblem p;
  p.m = p.n = p.k = 256;
  p.signature = s;
  const CudaSource src = emit_cuda({s, CudaGemmConfig::default_for(p, t).with_overrides("split_k=4"), t});
  const std::string& code = src.code;
  EXPECT_NE(code.find("tessera::epi::clamp(((tessera::epi::gelu(((p.alpha * acc) + "
                      "tessera::ld_global(static_cast<const float*>(p.inputs[0].data) + ((b * p.inputs[0].bs) + n))))"),
            std::string::npos)
      << code;
  EXPECT_NE(code.find("tessera::ld_global(static_cast<const float*>(p.inputs[1].data) + ((b * p.inputs[1].bs) + m))"),
            std::string::npos)
      << code;
  // Column-major C: row stride 1, column stride p.c.cs.
  EXPECT_NE(code.find("tessera::ld_global(static_cast<const float*>(p.c.data) + (((b * p.c.bs) + m) + (n * p.c.cs)))"),
            std::string::npos)
      << code;
  EXPECT_NE(code.find("AKMajor = true, BKMajor = false, DRowMajor = false"), std::string::npos);
  EXPECT_NE(code.find("extern \"C\" __global__ void __launch_bounds__(" + std::to_string(src.threads) + ", 1) " +
                      src.kernel + "(const tessera::GemmParams p)"),
            std::string::npos);
  // Split K adds the reduction kernel; stream-K adds none (a tile's last block adds the others' pieces).
  EXPECT_EQ(src.reduce_kernel, src.kernel + "_reduce");
  EXPECT_NE(code.find("tessera::splitk_reduce<Traits, Epilogue>(p)"), std::string::npos);
  const CudaSource streamed = emit_cuda({s, CudaGemmConfig::default_for(p, t).with_overrides("stream_k=1"), t});
  EXPECT_EQ(streamed.reduce_kernel, "");
  EXPECT_NE(streamed.code.find("tessera::gemm_tensorop_stream_k<Traits, Epilogue>(p)"), std::string::npos);
  EXPECT_EQ(streamed.code.find("splitk_reduce"), std::string::npos);
}

TEST(HostConversions, F16MatchesTheCompilersFloat16) {
  // _Float16 conversions are the compiler's IEEE binary16 with round-to-nearest-even: an independent reference.
  std::uint32_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 1664525u + 1013904223u;
    // Exponents across the whole f16 range and beyond, including subnormals, overflow and halfway cases.
    const float x = std::ldexp(static_cast<float>(state >> 9) / 8388608.0f + 1.0f, static_cast<int>(state % 48) - 30) *
                    ((state & 1u) ? -1.0f : 1.0f);
    const _Float16 h = static_cast<_Float16>(x);
    ASSERT_EQ(to_f16(x), __builtin_bit_cast(std::uint16_t, h)) << x;
    ASSERT_EQ(from_f16(to_f16(x)), static_cast<float>(h)) << x;
  }
  EXPECT_EQ(to_f16(65520.0f), 0x7c00);  // halfway to the next binade: rounds to inf
  EXPECT_EQ(to_f16(65519.0f), 0x7bff);
  EXPECT_TRUE(std::isnan(from_f16(to_f16(std::nanf("")))));
}

TEST(HostConversions, Tf32RoundsToNearestTiesAway) {
  EXPECT_EQ(round_tf32(1.0f), 1.0f);
  const float ulp = std::ldexp(1.0f, -10);  // tf32 keeps 10 mantissa bits
  EXPECT_EQ(round_tf32(1.0f + ulp / 2), 1.0f + ulp) << "a tie rounds away from zero";
  EXPECT_EQ(round_tf32(1.0f + ulp / 2 - std::ldexp(1.0f, -23)), 1.0f);
  EXPECT_EQ(round_tf32(-(1.0f + ulp / 2)), -(1.0f + ulp));
}

}  // namespace
}  // namespace tessera
