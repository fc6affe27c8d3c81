// From GemmArgs to a CUDA launch: parameter block, grid, split-K ranges and alignment claims.
#include <gtest/gtest.h>

#include <vector>

#include "generator/core/error.hpp"
#include "ops/cuda/cuda_backend.hpp"
#include "ops/cuda/tma_descriptor_cache.hpp"
#include "ops/gemm/cuda_gemm_launch.hpp"

namespace tessera {
namespace {

struct Operands {
  std::vector<std::uint16_t> a, b;
  std::vector<float> d, bias;
  GemmArgs args;
  Operands(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda = 0)
      : a(static_cast<std::size_t>(m * std::max(k, lda) + 8)),
        b(static_cast<std::size_t>(k * n + 8)),
        d(static_cast<std::size_t>(m * n)),
        bias(static_cast<std::size_t>(n)) {
    args.a = Tensor::matrix(a.data(), m, k, Layout::row_major(), lda, DType::f16);
    args.b = Tensor::matrix(b.data(), k, n, Layout::col_major(), 0, DType::f16);
    args.d = Tensor::matrix(d.data(), m, n);
  }
};

CudaGemmSpec spec_for(const GemmBinding& binding, const std::string& overrides) {
  const CudaTarget t = CudaTarget::parse("cuda:sm_80");
  return {binding.problem.signature, CudaGemmConfig::default_for(binding.problem, t).with_overrides(overrides), t};
}

TEST(CudaLaunch, FillsTheParameterBlockAndTheGrid) {
  Operands ops(300, 200, 1000);
  ops.args.set_epilogue("relu(alpha*acc + bias[n])");
  ops.args.inputs["bias"] = Tensor::vector(ops.bias.data(), 200);
  ops.args.alpha = 2;
  const GemmBinding binding = bind_gemm(ops.args);
  const CudaGemmSpec spec = spec_for(binding, "block_m=128,block_n=128,warp_m=64,warp_n=64,split_k=3");
  const CudaLaunch launch = plan_cuda_launch(binding, spec);
  EXPECT_EQ(launch.params.m, 300);
  EXPECT_EQ(launch.params.n, 200);
  EXPECT_EQ(launch.params.k, 1000);
  EXPECT_EQ(launch.params.a.data, ops.a.data());
  EXPECT_EQ(launch.params.a.rs, 1000);
  EXPECT_EQ(launch.params.b.cs, 1000);
  EXPECT_EQ(launch.params.inputs[0].data, ops.bias.data());
  EXPECT_EQ(launch.params.alpha, 2.0f);
  EXPECT_EQ(launch.grid_x, 3u * 2u);
  EXPECT_EQ(launch.grid_z, 3u);
  EXPECT_EQ(launch.block, 128u);
  // Splits cover K in whole block_k tiles: 3 × k_per_split >= K, and each split is a multiple of block_k.
  EXPECT_EQ(launch.params.k_per_split % spec.config.block_k, 0);
  EXPECT_GE(3 * launch.params.k_per_split, 1000);
  EXPECT_LT(2 * launch.params.k_per_split, 1000);
  EXPECT_EQ(launch.workspace_bytes, 3 * 300 * 200 * 4);
  EXPECT_GT(launch.reduce_grid, 0u);
  EXPECT_EQ(launch.flags_offset, -1);

  // Stream-K: one grid of SMs × 1 blocks, no second kernel; the workspace holds the pieces' partial sums, then a
  // flag per output tile (zeroed by the runtime before the launch).
  const CudaGemmSpec streamed = spec_for(binding, "block_m=128,block_n=128,warp_m=64,warp_n=64,stream_k=1");
  const CudaLaunch sk = plan_cuda_launch(binding, streamed);
  const StreamKPlan plan = stream_k_plan(binding.problem, streamed.config, streamed.target);
  EXPECT_EQ(sk.grid_x, static_cast<unsigned>(plan.blocks));
  EXPECT_EQ(sk.grid_z, 1u);
  EXPECT_EQ(sk.reduce_grid, 0u);
  EXPECT_EQ(plan.tiles, 3 * 2);
  EXPECT_GE(sk.flags_offset, plan.pieces * 300 * 200 * 4);
  EXPECT_EQ(sk.flags_offset % 16, 0);
  EXPECT_EQ(sk.flags_bytes, 6 * 4);
  EXPECT_EQ(sk.workspace_bytes, sk.flags_offset + sk.flags_bytes);
}

TEST(CudaLaunch, AlignmentClaimsAreCheckedAndFitted) {
  Operands ops(64, 64, 64, 64);
  const GemmBinding aligned = bind_gemm(ops.args);
  const CudaGemmSpec spec = spec_for(aligned, "align_a=8,align_b=8,align_c=4");
  EXPECT_NO_THROW(plan_cuda_launch(aligned, spec));

  // A leading dimension of 66 halves keeps 4-byte alignment only.
  Operands padded(64, 64, 64, 66);
  const GemmBinding binding = bind_gemm(padded.args);
  try {
    plan_cuda_launch(binding, spec);
    ADD_FAILURE() << "accepted a misaligned A";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(e.argument(), "a");
    EXPECT_NE(std::string(e.what()).find("only allows 2"), std::string::npos) << e.what();
  }
  const CudaGemmConfig fitted = fit_alignment(spec.config, binding);
  EXPECT_EQ(fitted.align_a, 2);
  EXPECT_EQ(fitted.align_b, 8);
  EXPECT_NO_THROW(plan_cuda_launch(binding, {spec.signature, fitted, spec.target}));

  // A pointer one element off a 16-byte boundary.
  Operands shifted(64, 64, 64);
  shifted.args.a.data = shifted.a.data() + 1;
  EXPECT_EQ(fit_alignment(spec.config, bind_gemm(shifted.args)).align_a, 1);
}

TEST(CudaLaunch, RejectsGridsBeyondTheHardware) {
  std::vector<std::uint16_t> a(8 * 8), b(8 * 8);
  std::vector<float> d(70000 * 8 * 8);
  GemmArgs args;
  args.a = Tensor::matrix(a.data(), 8, 8, Layout::row_major(), 0, DType::f16);
  args.b = Tensor::matrix(b.data(), 8, 8, Layout::row_major(), 0, DType::f16);
  args.d = Tensor::batched(d.data(), 70000, 8, 8);
  const GemmBinding binding = bind_gemm(args);
  EXPECT_THROW(plan_cuda_launch(binding, spec_for(binding, "")), InvalidArgument);
}

// A kernel's TMA descriptors are encoded once per tensor and reused while it is among the 16 most recent: the same
// bytes the back-end encodes, a changed pointer or shape encoded anew.
TEST(TmaDescriptorCache, ReusesTheDescriptorsOfRecentTensors) {
  const auto backend = make_emulator_backend("cuda-emu:sm_90a", EmuOptions{});
  std::vector<float> memory(64 * 64 * 40);
  const auto tensor = [&](std::size_t offset, std::uint64_t rows) {
    TmaTensor t;
    t.global = memory.data() + offset * 64;
    t.element_bytes = 4;
    t.dims = {64, rows, 1};
    t.stride_bytes = {256, 256 * rows};
    t.box = {32, 16, 1};
    t.swizzle_bytes = 128;
    return t;
  };
  TmaDescriptorCache cache;
  EXPECT_EQ(cache.get(*backend, tensor(0, 64)), backend->tma_descriptor(tensor(0, 64)));
  EXPECT_EQ(cache.get(*backend, tensor(0, 64)), backend->tma_descriptor(tensor(0, 64)));
  EXPECT_EQ(cache.misses(), 1u);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.get(*backend, tensor(0, 32)), backend->tma_descriptor(tensor(0, 32)));    // another shape
  EXPECT_EQ(cache.get(*backend, tensor(64, 64)), backend->tma_descriptor(tensor(64, 64)));  // another pointer
  EXPECT_EQ(cache.misses(), 3u);
  for (std::size_t i = 1; i <= 16; ++i) cache.get(*backend, tensor(i * 64, 16));  // 16 more (64, 16 is not 64, 64)
  EXPECT_EQ(cache.misses(), 19u);
  cache.get(*backend, tensor(64 * 16, 16));  // still kept
  EXPECT_EQ(cache.hits(), 2u);
  cache.get(*backend, tensor(0, 64));  // evicted by the 16 after it
  EXPECT_EQ(cache.misses(), 20u);
}

}  // namespace
}  // namespace tessera
