// The CUDA test matrix compiled with NVRTC for sm_80 and sm_90: every kernel must be free of spills and local
// memory, fit the architecture's registers and shared memory, and contain the instructions it claims to use.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "generator/error.hpp"
#include "jit/cuda_gemm_build.hpp"

namespace tessera {
namespace {

struct MatrixCase {
  DType in;
  Layout a, b;
  std::string tile;  // config overrides
  std::string epilogue;
  std::string arch;

  std::string label() const {
    std::string text = fmt::format("{}_{}{}_{}_{}_{}", dtype_name(in), a.name()[0], b.name()[0], tile,
                                   epilogue.empty() ? "plain" : "fused", arch);
    for (char& c : text)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    return text;
  }
};

void PrintTo(const MatrixCase& c, std::ostream* os) { *os << c.label(); }

std::vector<MatrixCase> matrix() {
  std::vector<MatrixCase> cases;
  const std::vector<std::pair<Layout, Layout>> layouts{{Layout::row_major(), Layout::row_major()},
                                                       {Layout::row_major(), Layout::col_major()},
                                                       {Layout::col_major(), Layout::row_major()},
                                                       {Layout::col_major(), Layout::col_major()}};
  const std::vector<std::string> tiles{
      "block_m=64,block_n=64,warp_m=32,warp_n=32", "block_m=128,block_n=128,warp_m=64,warp_n=64",
      "block_m=128,block_n=256,warp_m=64,warp_n=64", "block_m=256,block_n=128,warp_m=64,warp_n=64"};
  const std::string fused = "gelu(alpha*acc + bias[n]) + beta*c";
  int index = 0;
  for (const char* arch : {"sm_80", "sm_90"}) {
    // Tensor cores: every input type × layout × block tile, stages cycling 2..4, plain and fused epilogues.
    for (DType in : {DType::f16, DType::bf16, DType::tf32})
      for (const auto& [a, b] : layouts)
        for (const auto& tile : tiles) {
          const int stages = 2 + index % 3;
          const std::string epilogue = index % 2 ? fused : "";
          cases.push_back({in, a, b, fmt::format("{},stages={}", tile, stages), epilogue, arch});
          ++index;
        }
    // SIMT f32: each layout with both SIMT tiles, plain and fused.
    for (const auto& [a, b] : layouts)
      for (const char* tile : {"simt=1,block_m=128,block_n=128,block_k=8,warp_m=64,warp_n=32,stages=2",
                               "simt=1,block_m=64,block_n=64,block_k=8,warp_m=32,warp_n=32,stages=2"}) {
        cases.push_back({DType::f32, a, b, tile, index % 2 ? fused : "", arch});
        ++index;
      }
    // Split-K (with its reduction kernel) and unaligned operands (narrow cp.async, synchronous 2-byte copies).
    cases.push_back({DType::f16, Layout::row_major(), Layout::col_major(),
                     "block_m=64,block_n=64,warp_m=32,warp_n=32,stages=3,split_k=4", fused, arch});
    cases.push_back({DType::bf16, Layout::col_major(), Layout::row_major(),
                     "block_m=128,block_n=128,warp_m=64,warp_n=64,stages=3,align_a=1,align_b=2,align_c=1", "", arch});
    cases.push_back({DType::tf32, Layout::row_major(), Layout::row_major(),
                     "block_m=128,block_n=128,warp_m=64,warp_n=64,stages=3,align_a=1,align_b=2,split_k=2", fused,
                     arch});
  }
  return cases;
}

class NvrtcMatrix : public ::testing::TestWithParam<MatrixCase> {};

TEST_P(NvrtcMatrix, CompilesWithoutSpillsAndHasTheClaimedInstructions) {
  const MatrixCase& mc = GetParam();
  const CudaTarget target = CudaTarget::parse("cuda:" + mc.arch);
  GemmSignature s;
  s.a = {mc.in, mc.a};
  s.b = {mc.in, mc.b};
  s.d = {DType::f32, Layout::row_major()};
  s.c = {DType::f32, Layout::zero()};
  if (!mc.epilogue.empty()) {
    s.epilogue = Epilogue::parse(mc.epilogue);
    s.c = s.d;
    s.inputs = {{"bias", IndexForm::N, {DType::f32, Layout::row_major()}}};
  }
  CudaGemmConfig config;
  config.math = mc.in == DType::f32 ? CudaMath::Simt : CudaMath::TensorOp;
  config.block_k = mc.in == DType::f32 ? 8 : 64 / dtype_bytes(mc.in);
  config.align_a = config.align_b = 16 / dtype_bytes(mc.in);
  config = config.with_overrides(mc.tile);
  const CudaGemmSpec spec{s, config, target};

  CudaGemmBuild build;
  try {
    build = build_cuda_gemm(spec, true);
  } catch (const Unavailable& e) {
    GTEST_SKIP() << "NVRTC is not installed here: " << e.what();
  }
  const KernelResources& r = build.gemm;
  SCOPED_TRACE(build.source.kernel);
  EXPECT_GT(r.registers, 0) << "the ptxas report was not found in:\n" << build.binary.log;
  EXPECT_LE(r.registers, 255);
  EXPECT_EQ(r.spill_store_bytes, 0);
  EXPECT_EQ(r.spill_load_bytes, 0);
  EXPECT_EQ(r.stack_bytes, 0);
  EXPECT_EQ(build.ptx.local_access, 0) << "ld.local/st.local in the PTX";
  EXPECT_LE(build.source.shared_bytes + r.static_shared_bytes, target.max_shared_per_block);
  EXPECT_GE(r.registers * build.source.threads, 0);
  EXPECT_LE(r.registers * build.source.threads, target.registers_per_sm);
  ASSERT_GE(build.binary.cubin.size(), 4u);
  EXPECT_EQ(std::string(build.binary.cubin.data(), 4),
            "\x7f"
            "ELF");

  const std::string& ptx = build.binary.ptx;
  const auto has = [&](const std::string& needle) { return ptx.find(needle) != std::string::npos; };
  if (mc.in == DType::f32) {
    EXPECT_EQ(build.ptx.mma, 0);
    EXPECT_TRUE(has("fma.rn.f32"));
  } else {
    const std::string mma = mc.in == DType::tf32
                                ? "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
                                : fmt::format("mma.sync.aligned.m16n8k16.row.col.f32.{0}.{0}.f32", dtype_name(mc.in));
    EXPECT_TRUE(has(mma)) << mma;
    // ldmatrix moves 16-bit elements (with .trans for M/N-contiguous tiles); 32-bit tf32 tiles use it only when
    // K is contiguous.
    const bool k_major = mc.a == Layout::row_major() || mc.b == Layout::col_major();
    if (mc.in != DType::tf32 || k_major) {
      EXPECT_GT(build.ptx.ldmatrix, 0);
    }
    if (mc.in != DType::tf32 && (mc.a == Layout::col_major() || mc.b == Layout::row_major())) {
      EXPECT_TRUE(has("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"));
    }
    const int elem = dtype_bytes(mc.in);
    if (spec.config.align_a * elem == 16 || spec.config.align_b * elem == 16) {
      EXPECT_TRUE(has("cp.async.cg.shared.global")) << "16-byte asynchronous copies";
    } else if (spec.config.align_a * elem >= 4 || spec.config.align_b * elem >= 4) {
      EXPECT_TRUE(has("cp.async.ca.shared.global")) << "narrow asynchronous copies";
    }
    EXPECT_TRUE(has("cp.async.wait_group"));
    EXPECT_TRUE(has("cp.async.commit_group"));
  }
  if (spec.config.split_k > 1) {
    ASSERT_FALSE(build.source.reduce_kernel.empty());
    EXPECT_GT(build.reduce.registers, 0);
    EXPECT_EQ(build.reduce.spill_store_bytes + build.reduce.spill_load_bytes, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Cuda, NvrtcMatrix, ::testing::ValuesIn(matrix()),
                         [](const auto& param_info) { return param_info.param.label(); });

}  // namespace
}  // namespace tessera
