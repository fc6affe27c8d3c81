// The CUDA test matrix compiled with NVRTC for sm_80 and sm_90: every kernel must be free of spills and local
// memory, fit the architecture's registers and shared memory, and contain the instructions it claims to use.
#include <gtest/gtest.h>

#include <array>

#include <fmt/format.h>

#include "generator/core/error.hpp"
#include "generator/gemm/cuda_gemm_model.hpp"
#include "jit/cuda_gemm_build.hpp"
#include "tests/cuda/cuda_matrix.hpp"

namespace tessera {
namespace {

class NvrtcMatrix : public ::testing::TestWithParam<MatrixCase> {};

TEST_P(NvrtcMatrix, CompilesWithoutSpillsAndHasTheClaimedInstructions) {
  const MatrixCase& mc = GetParam();
  const CudaGemmSpec spec = matrix_spec(mc);
  const CudaTarget& target = spec.target;
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
  } else if (spec.config.math == CudaMath::Wgmma) {
    // Hopper: warpgroup MMAs from shared-memory descriptors, TMA copies completing on mbarriers; no mma.sync,
    // ldmatrix or cp.async.
    const std::string wgmma = fmt::format("wgmma.mma_async.sync.aligned.m64n{0}k{1}.f32.{2}.{2}", spec.config.block_n,
                                          mc.in == DType::tf32 ? 8 : 16, dtype_name(mc.in));
    EXPECT_TRUE(has(wgmma)) << wgmma;
    for (const char* instruction : {"cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
                                    "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.arrive.expect_tx",
                                    "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned 1"})
      EXPECT_TRUE(has(instruction)) << instruction;
    EXPECT_EQ(build.ptx.mma + build.ptx.ldmatrix + build.ptx.cp_async, 0);
    // Clusters: the shape in the kernel, multicast loads, releases to the peers' barriers, the cluster barrier.
    const int cluster = spec.config.cluster_m * spec.config.cluster_n;
    const bool multicast = has(".multicast::cluster"), remote = has("mapa.shared::cluster.u32");
    EXPECT_EQ(cluster > 1, has(fmt::format(".reqnctapercluster {}, 1, 1", cluster)));
    EXPECT_EQ(cluster > 1, multicast);
    EXPECT_EQ(cluster > 1, remote && has("mbarrier.arrive.release.cluster.shared::cluster.b64"));
    EXPECT_EQ(cluster > 1,
              has("barrier.cluster.arrive.release.aligned") && has("barrier.cluster.wait.acquire.aligned"));
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

// The default 16-bit kernels' main loops, counted in their PTX: at most ~2 instructions beside each mma (4.4–5.0 before
// copy offsets and fragment offsets were set up once per kernel and the shared window's base once), in every layout;
// and the analytic model's count of those instructions within a quarter of the PTX's.
TEST(CudaGemmMainLoop, DefaultKernelsIssueFewInstructionsBesideTheMma) {
  for (const char* arch : {"cuda:sm_80", "cuda:sm_90"})
    for (DType in : {DType::f16, DType::bf16})
      for (Layout a : {Layout::row_major(), Layout::col_major()})
        for (Layout b : {Layout::row_major(), Layout::col_major()}) {
          CudaGemmSpec spec;
          spec.target = CudaTarget::parse(arch);
          GemmProblem p;
          p.m = p.n = p.k = 4096;
          p.signature.a = {in, a};
          p.signature.b = {in, b};
          p.signature.c = {DType::f32, Layout::zero()};
          p.signature.d = {DType::f32, Layout::row_major()};
          spec.signature = p.signature;
          spec.config = CudaGemmConfig::default_for(p, spec.target);
          CudaGemmBuild build;
          try {
            build = build_cuda_gemm(spec, false);
          } catch (const Unavailable& e) {
            GTEST_SKIP() << "NVRTC is not installed here: " << e.what();
          }
          SCOPED_TRACE(build.source.kernel);
          const CudaMainLoopCounts model = cuda_main_loop_counts(spec.signature, spec.config);
          const double warps_mma = build.ptx.main_loop_mma;
          ASSERT_EQ(warps_mma, model.math) << "the main loop is one k-tile of the warp's mma";
          EXPECT_LE(build.ptx.main_loop_other, 2.0 * warps_mma);
          EXPECT_NEAR(model.other, build.ptx.main_loop_other, 0.25 * build.ptx.main_loop_other);
        }
}

// The configs Hopper's defaults pick (data-parallel tiles, clusters, stream-K, with them both) compile without spills,
// plain and with a fused epilogue: squares, deep K on few tiles, a flat K, skinny M.
TEST(CudaGemmDefaults, HopperDefaultsCompileWithoutSpills) {
  const CudaTarget target = CudaTarget::parse("cuda:sm_90a");
  for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{{4096, 4096, 4096},
                                                                        {8192, 8192, 8192},
                                                                        {1024, 1024, 8192},
                                                                        {6144, 6144, 2048},
                                                                        {3072, 4096, 4096},
                                                                        {16, 4096, 4096}})
    for (const bool fused : {false, true}) {
      CudaGemmSpec spec;
      spec.target = target;
      GemmProblem p;
      p.m = m, p.n = n, p.k = k;
      p.signature.a = {DType::f16, Layout::row_major()};
      p.signature.b = {DType::f16, Layout::col_major()};
      p.signature.d = {DType::f32, Layout::row_major()};
      p.signature.c = {DType::f32, fused ? Layout::row_major() : Layout::zero()};
      if (fused) {
        p.signature.epilogue = Epilogue::parse("gelu(alpha*acc + bias[n]) + beta*c");
        p.signature.inputs = {{"bias", IndexForm::N, {DType::f32, Layout::row_major()}}};
      }
      spec.signature = p.signature;
      spec.config = CudaGemmConfig::default_for(p, target);
      CudaGemmBuild build;
      try {
        build = build_cuda_gemm(spec, true);
      } catch (const Unavailable& e) {
        GTEST_SKIP() << "NVRTC is not installed here: " << e.what();
      }
      SCOPED_TRACE(fmt::format("{}x{}x{}{}: {}", m, n, k, fused ? " fused" : "", build.source.kernel));
      EXPECT_GT(build.gemm.registers, 0);
      EXPECT_EQ(build.gemm.spill_store_bytes, 0);
      EXPECT_EQ(build.gemm.spill_load_bytes, 0);
      EXPECT_EQ(build.gemm.stack_bytes, 0);
    }
}

INSTANTIATE_TEST_SUITE_P(Cuda, NvrtcMatrix, ::testing::ValuesIn(matrix()),
                         [](const auto& param_info) { return param_info.param.label(); });

}  // namespace
}  // namespace tessera
