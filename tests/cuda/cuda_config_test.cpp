// The CUDA vocabulary without compiling anything: targets, configs and the rules validate() enforces, specs.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "generator/core/error.hpp"
#include "generator/gemm/cuda_gemm_config.hpp"
#include "generator/gemm/cuda_gemm_model.hpp"
#include "generator/gemm/cuda_gemm_spec.hpp"
#include "generator/gemm/gemm_json.hpp"

namespace tessera {
namespace {

GemmProblem problem(std::int64_t m, std::int64_t n, std::int64_t k, DType in, Layout a = Layout::row_major(),
                    Layout b = Layout::row_major()) {
  GemmProblem p;
  p.m = m, p.n = n, p.k = k;
  p.signature.a = {in, a};
  p.signature.b = {in, b};
  p.signature.c = {DType::f32, Layout::zero()};
  p.signature.d = {DType::f32, Layout::row_major()};
  return p;
}

// The rule's text must appear in the ConfigError.
void expect_rule(const GemmSignature& s, const CudaGemmConfig& c, const CudaTarget& t, const std::string& rule) {
  try {
    validate(s, c, t);
    ADD_FAILURE() << "accepted; expected: " << rule;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(rule), std::string::npos) << e.what();
  }
}

TEST(CudaTarget, ParsesKnownArchitecturesAndRejectsOthers) {
  const CudaTarget a100 = CudaTarget::parse("cuda:sm_80");
  EXPECT_EQ(a100.sm, 80);
  EXPECT_EQ(a100.arch(), "sm_80");
  EXPECT_EQ(a100.max_shared_per_block, 166912);
  const CudaTarget h100a = CudaTarget::parse("cuda:sm_90a");
  EXPECT_TRUE(h100a.arch_specific);
  EXPECT_EQ(h100a.str(), "cuda:sm_90a");
  EXPECT_EQ(CudaTarget::parse("cuda:sm_86").max_shared_per_block, 101376);
  EXPECT_TRUE(CudaTarget::parse("cuda-emu:sm_89").emulated);
  for (const char* bad : {"cuda:sm_70", "cuda:sm_80a", "cuda:", "cuda:sm", "gpu:sm_80", "cuda:sm_9x"})
    EXPECT_THROW(CudaTarget::parse(bad), InvalidArgument) << bad;
}

TEST(CudaGemmConfig, DefaultsValidateAcrossShapesTypesLayoutsAndTargets) {
  for (const char* target : {"cuda:sm_80", "cuda:sm_86", "cuda:sm_89", "cuda:sm_90"})
    for (DType in : {DType::f32, DType::tf32, DType::f16, DType::bf16})
      for (auto [m, n, k] : {std::tuple{1, 1, 1}, {17, 129, 255}, {64, 64, 8192}, {4096, 4096, 4096}, {1000, 8, 3}})
        for (Layout a : {Layout::row_major(), Layout::col_major()})
          for (Layout b : {Layout::row_major(), Layout::col_major()}) {
            const GemmProblem p = problem(m, n, k, in, a, b);
            const CudaTarget t = CudaTarget::parse(target);
            const CudaGemmConfig c = CudaGemmConfig::default_for(p, t);
            EXPECT_NO_THROW(validate(p.signature, c, t)) << target << " " << to_json(c).dump();
            EXPECT_EQ(c.math, in == DType::f32 ? CudaMath::Simt : CudaMath::TensorOp);
          }
}

TEST(CudaGemmConfig, DefaultsFollowTheProblem) {
  const CudaTarget t = CudaTarget::parse("cuda:sm_80");
  const CudaGemmConfig big = CudaGemmConfig::default_for(problem(4096, 4096, 4096, DType::f16), t);
  EXPECT_EQ(big.split_k, 1);
  EXPECT_GE(big.block_m * big.block_n, 128 * 128);
  // 128-byte rows of K per stage (four mma k-steps per barrier, as CUTLASS) and as many stages as fit, at least 3.
  for (const char* arch : {"cuda:sm_80", "cuda:sm_86", "cuda:sm_89", "cuda:sm_90"})
    for (DType in : {DType::f16, DType::bf16, DType::tf32}) {
      const CudaTarget target = CudaTarget::parse(arch);
      const GemmProblem p = problem(4096, 4096, 4096, in);
      const CudaGemmConfig c = CudaGemmConfig::default_for(p, target);
      EXPECT_EQ(c.block_k * dtype_bytes(in), 128) << arch;
      EXPECT_GE(c.stages, 3) << arch;
      EXPECT_LE(c.shared_bytes(p.signature), target.max_shared_per_block) << arch;
    }
  const CudaGemmConfig deep = CudaGemmConfig::default_for(problem(64, 64, 16384, DType::f16), t);
  EXPECT_TRUE(deep.split_k > 1 || deep.stream_k > 0) << "one output tile and deep K: split K over the idle SMs";
  // Skinny M (a decoding step's linear layer): 16- or 32-row tiles, not 64 rows mostly padding.
  EXPECT_EQ(CudaGemmConfig::default_for(problem(16, 4096, 4096, DType::f16), t).block_m, 16);
  EXPECT_EQ(CudaGemmConfig::default_for(problem(24, 4096, 4096, DType::bf16), t).block_m, 32);
  const CudaGemmConfig odd = CudaGemmConfig::default_for(problem(100, 100, 1001, DType::f16), t);
  EXPECT_EQ(odd.align_a, 1) << "a packed row-major A with K = 1001 has 2-byte-aligned rows";
  EXPECT_EQ(odd.align_b, 4) << "row-major B with N = 100: 8-byte vectors";
}

// The defaults fill the machine: over every M, N, K in 256..8192 (11 sizes each), the share of shapes whose last wave
// leaves at most a tenth of the SMs idle, with stream-K where the model prefers it (data-parallel tiles alone: 247
// and 548 of 1331 on sm_80 and sm_90; with a second fix-up kernel 670 and 847; with the fix-up in the kernel 1110,
// 1234, and 1029 on sm_90a's wgmma kernel, 448 before it had stream-K; 964 since its 128 x 256 tiles, which spill,
// left the space, and 959 with clusters wherever they idle no more SMs than the same tiles without). Stream-K is only
// taken where the model predicts it faster than the same tiles without it.
TEST(CudaGemmConfig, DefaultsFillTheMachine) {
  for (const auto& [arch, least] : {std::pair{"cuda:sm_80", 1090}, {"cuda:sm_90", 1210}, {"cuda:sm_90a", 955}}) {
    const CudaTarget t = CudaTarget::parse(arch);
    int filled = 0, streamed = 0;
    for (int m : {256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192})
      for (int n : {256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192})
        for (int k : {256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192}) {
          const GemmProblem p = problem(m, n, k, DType::f16);
          const CudaGemmConfig c = CudaGemmConfig::default_for(p, t);
          filled += last_wave_idle(p, c, t) <= 0.1;
          if (c.stream_k == 0) continue;
          ++streamed;
          CudaGemmConfig tiles = c;
          tiles.stream_k = 0;
          EXPECT_LT(cuda_analytic_seconds(p, c, t), cuda_analytic_seconds(p, tiles, t)) << m << "x" << n << "x" << k;
          EXPECT_EQ(last_wave_idle(p, c, t), 0.0);
        }
    EXPECT_GE(filled, least) << arch;
    EXPECT_GT(streamed, 200) << arch;
  }
  // Stream-K's plan: the iterations cover every tile's K once; a tile meets at most `pieces` blocks.
  const CudaTarget t = CudaTarget::parse("cuda:sm_80");
  CudaGemmConfig c = CudaGemmConfig::default_for(problem(1000, 1000, 1000, DType::f16), t).with_overrides("stream_k=1");
  const StreamKPlan plan = stream_k_plan(problem(1000, 1000, 1000, DType::f16), c, t);
  EXPECT_EQ(plan.total, plan.tiles * plan.k_tiles);
  EXPECT_EQ(plan.blocks, 108);
  // The pieces' partial sums, then a flag per tile.
  EXPECT_EQ(c.workspace_bytes(problem(1000, 1000, 1000, DType::f16), t),
            plan.pieces * 1000 * 1000 * 4 + plan.tiles * 4);
  // The hybrid: 4096² in 128×128 tiles is 9 full waves of 108 and 52 tiles over; the last wave (and the one before)
  // share the iterations, the other tiles run whole; flags only for the shared tiles.
  for (const auto& [waves, shared] : {std::pair{1, 52}, {2, 160}}) {
    const GemmProblem big = problem(4096, 4096, 4096, DType::f16);
    const CudaGemmConfig h = CudaGemmConfig::default_for(big, t).with_overrides(
        fmt::format("block_m=128,block_n=128,warp_m=64,warp_n=64,stream_k=1,stream_k_waves={}", waves));
    const StreamKPlan hp = stream_k_plan(big, h, t);
    EXPECT_EQ(hp.tiles, 1024);
    EXPECT_EQ(hp.shared_tiles, shared);
    EXPECT_EQ(hp.total, shared * 64);
    EXPECT_EQ(hp.blocks, 108);
    EXPECT_EQ(h.workspace_bytes(big, t), stream_k_flags_offset(big, h, t) + shared * 4);
  }
}

TEST(CudaGemmConfig, ValidateNamesTheRuleItBreaks) {
  const CudaTarget sm80 = CudaTarget::parse("cuda:sm_80"), sm86 = CudaTarget::parse("cuda:sm_86");
  const GemmSignature f16 = problem(256, 256, 256, DType::f16).signature;
  const GemmSignature f32 = problem(256, 256, 256, DType::f32).signature;
  const CudaGemmConfig tc;
  expect_rule(f16, tc.with_overrides("warp_m=48"), sm80, "warp_m (48) must be a power of two");
  expect_rule(f16, tc.with_overrides("block_m=64,warp_m=128"), sm80, "multiple of the warp tile");
  expect_rule(f16, tc.with_overrides("warp_n=128"), sm80, "registers per thread");
  expect_rule(f16, tc.with_overrides("stages=6"), sm80, "stages (6) must be in 2..5");
  expect_rule(f16, tc.with_overrides("block_k=8"), sm80, "block_k (8) must be a multiple of the mma K");
  expect_rule(f16, tc.with_overrides("block_n=256,stages=5"), sm86, "exceeds sm_86's 101376 bytes");
  expect_rule(f16, tc.with_overrides("align_a=16"), sm80, "align_a (16) must be a power of two of at most 16 bytes");
  expect_rule(f16, tc.with_overrides("split_k=0"), sm80, "split_k (0) must be in 1..64");
  expect_rule(f16, tc.with_overrides("stream_k=5"), sm80, "stream_k (5) must be in 0..4");
  expect_rule(f16, tc.with_overrides("stream_k=1,split_k=2"), sm80, "stream_k and split_k exclude each other");
  expect_rule(f16, tc.with_overrides("stream_k=1,stream_k_waves=3"), sm80, "stream_k_waves (3) must be in 0..2");
  expect_rule(f16, tc.with_overrides("stream_k=0,stream_k_waves=1"), sm80, "stream_k_waves needs stream_k");
  expect_rule(f16, tc.with_overrides("swizzle=3"), sm80, "swizzle (3)");
  expect_rule(f16, tc.with_overrides("simt=1"), sm80, "f16 inputs need tensorop math");
  expect_rule(f32, tc, sm80, "f32 inputs need simt math");
  expect_rule(f16, tc.with_overrides("block_m=512,block_n=128,warp_m=32,warp_n=32"), sm80, "exceed 1024 threads");
  expect_rule(f16, tc.with_overrides("block_m=16,block_n=64,warp_m=16,warp_n=16,block_k=16"), sm80,
              "16-byte chunks must divide evenly");
  const CudaGemmConfig simt = tc.with_overrides("simt=1,block_k=8,warp_n=32,stages=2,align_a=4,align_b=4");
  EXPECT_NO_THROW(validate(f32, simt, sm80));
  expect_rule(f32, simt.with_overrides("stages=3"), sm80, "SIMT kernels double-buffer");
  expect_rule(f32, simt.with_overrides("warp_m=16"), sm80, "SIMT warp tile 16x32");

  GemmSignature mixed = f16;
  mixed.b.dtype = DType::bf16;
  expect_rule(mixed, tc, sm80, "A and B dtypes must match");
  GemmSignature strided = f16;
  strided.a.layout = Layout::strided();
  expect_rule(strided, tc, sm80, "A layout must be row or col");
  GemmSignature f16_out = f16;
  f16_out.d.dtype = DType::f16;
  EXPECT_NO_THROW(validate(f16_out, tc, sm80));
  f16_out.d.dtype = DType::bf16;
  expect_rule(f16_out, tc, sm80, "D dtype bf16 is not supported with f16 inputs");
  GemmSignature i8 = f16;
  i8.a.dtype = i8.b.dtype = DType::i8;
  expect_rule(i8, tc, sm80, "input dtype i8 is not supported");
}

// sm_90a: the wgmma kernel for 16-bit operands aligned for TMA (validating wherever it is chosen); mma.sync
// elsewhere, and for the same problem on plain sm_90.
TEST(CudaGemmConfig, HopperDefaultsToTheWgmmaKernelWhereItApplies) {
  const CudaTarget sm90a = CudaTarget::parse("cuda:sm_90a"), sm90 = CudaTarget::parse("cuda:sm_90");
  const Layout row = Layout::row_major(), col = Layout::col_major();
  for (DType in : {DType::f16, DType::bf16})
    for (auto [m, n, k] : {std::tuple{1, 1, 8}, {17, 129, 256}, {64, 64, 8192}, {4096, 4096, 4096}, {8192, 8192, 64}}) {
      const GemmProblem p = problem(m, n, k, in, row, col);
      const CudaGemmConfig c = CudaGemmConfig::default_for(p, sm90a);
      EXPECT_EQ(c.math, CudaMath::Wgmma) << m << "x" << n << "x" << k;
      EXPECT_NO_THROW(validate(p.signature, c, sm90a)) << to_json(c).dump();
      EXPECT_EQ(CudaGemmConfig::default_for(p, sm90).math, CudaMath::TensorOp);
    }
  for (Layout a : {row, col})  // M/N-major operands through wgmma's transpose bits
    for (Layout b : {row, col})
      EXPECT_EQ(CudaGemmConfig::default_for(problem(4096, 4096, 4096, DType::f16, a, b), sm90a).math, CudaMath::Wgmma);
  EXPECT_EQ(CudaGemmConfig::default_for(problem(4099, 4096, 4096, DType::f16, col, row), sm90a).math,
            CudaMath::TensorOp);  // an M-major A whose columns are not 16-byte aligned
  EXPECT_EQ(CudaGemmConfig::default_for(problem(4096, 4096, 4099, DType::f16, row, col), sm90a).math,
            CudaMath::TensorOp);  // K rows not 16-byte aligned for TMA
  EXPECT_EQ(CudaGemmConfig::default_for(problem(4096, 4096, 4096, DType::tf32, row, col), sm90a).math, CudaMath::Wgmma);
  EXPECT_EQ(CudaGemmConfig::default_for(problem(4096, 4096, 4096, DType::tf32, row, row), sm90a).math,
            CudaMath::TensorOp);  // tf32 has no transpose
  const GemmSignature rc = problem(256, 256, 256, DType::f16, row, col).signature;
  const CudaGemmConfig wg = CudaGemmConfig{}.with_overrides("wgmma=1,block_k=64,warp_m=64,warp_n=128");
  EXPECT_NO_THROW(validate(rc, wg, sm90a));
  expect_rule(rc, wg, sm90, "wgmma math needs sm_90a");
  expect_rule(problem(256, 256, 256, DType::tf32, row, row).signature, wg, sm90a, "tf32 with row-major A");
  expect_rule(rc, wg.with_overrides("block_n=512,warp_n=512"), sm90a, "wgmma block_n (512) must be 64, 128 or 256");
  expect_rule(rc, wg.with_overrides("warp_n=64"), sm90a, "wgmma warp tile must be 64 x block_n");
  expect_rule(rc, wg.with_overrides("block_k=32"), sm90a, "wgmma block_k (32) must span 128 bytes");
  expect_rule(rc, wg.with_overrides("stages=9"), sm90a, "wgmma stages (9) must be in 2..8");
  EXPECT_NO_THROW(validate(rc, wg.with_overrides("split_k=4"), sm90a));
  EXPECT_NO_THROW(validate(rc, wg.with_overrides("stream_k=1"), sm90a));
  // D by TMA stores: the wgmma kernel's default where D is row-major with 16-byte rows.
  EXPECT_NO_THROW(validate(rc, wg.with_overrides("tma_store=1"), sm90a));
  expect_rule(rc, CudaGemmConfig{}.with_overrides("tma_store=1"), sm90a, "tma_store needs the wgmma kernel");
  expect_rule(rc, wg.with_overrides("tma_store=1,align_c=2"), sm90a, "tma_store needs D's rows 16-byte aligned");
  GemmSignature rc_col_d = rc;
  rc_col_d.d.layout = Layout::col_major();
  expect_rule(rc_col_d, wg.with_overrides("tma_store=1"), sm90a, "tma_store needs a row-major D");
  EXPECT_TRUE(CudaGemmConfig::default_for(problem(4096, 4096, 4096, DType::bf16, row, col), sm90a).tma_store);
  EXPECT_FALSE(CudaGemmConfig::default_for(problem(4096, 4096, 4098, DType::bf16, row, col), sm90a).tma_store)
      << "K of 4098 (rows not 16-byte aligned): no wgmma, no TMA";
  EXPECT_FALSE(CudaGemmConfig::default_for(problem(4096, 4094, 4096, DType::bf16, row, col), sm90a).tma_store)
      << "D's rows of 4094 floats are 8-byte aligned";
  // Clusters: wgmma only (with or without stream-K), each shared tile split into whole parts; the default where the
  // model finds L2 a limit and the padded grid still fills its last wave (3072 x 4096: 384 tiles of 128 x 256 on 132
  // SMs); the grid padded to whole clusters.
  EXPECT_NO_THROW(validate(rc, wg.with_overrides("block_m=128,cluster_m=2,cluster_n=2"), sm90a));
  expect_rule(rc, CudaGemmConfig{}.with_overrides("cluster_m=2"), sm90, "clusters need the wgmma kernel");
  EXPECT_NO_THROW(validate(rc, wg.with_overrides("block_m=128,cluster_m=2,stream_k=1,tma_store=0"), sm90a));
  expect_rule(rc, wg.with_overrides("block_m=128,cluster_m=2,stream_k=1,tma_store=1"), sm90a,
              "tma_store with stream_k over clusters spills registers");
  expect_rule(rc, wg.with_overrides("block_m=128,block_n=256,warp_n=256,stream_k=1"), sm90a,
              "384 threads × ~184 registers exceed the 65536 registers of an SM");
  expect_rule(rc, wg.with_overrides("cluster_n=4"), sm90a, "cluster_m and cluster_n (1 and 4) must be 1 or 2");
  expect_rule(problem(256, 256, 256, DType::f16, row, row).signature,
              wg.with_overrides("block_n=64,warp_n=64,cluster_m=2"), sm90a, "cannot be multicast over a 2x1 cluster");
  const CudaGemmConfig big = CudaGemmConfig::default_for(problem(3072, 4096, 4096, DType::bf16, row, col), sm90a);
  EXPECT_GT(big.cluster_m * big.cluster_n, 1);
  EXPECT_LE(last_wave_idle(problem(3072, 4096, 4096, DType::bf16, row, col), big, sm90a), 0.1);
  CudaGemmConfig padded = wg.with_overrides("block_m=128,cluster_m=2,cluster_n=2");
  EXPECT_EQ(cuda_grid_blocks(problem(300, 300, 256, DType::f16, row, col), padded), 4 * 4);  // 3 x 3 tiles
  // Deep K on a grid of few tiles: the model splits K for the wgmma kernel, by split-K or stream-K (1024 x 1024 is
  // 32 tiles of 128 x 256 on 132 SMs).
  const CudaGemmConfig deep = CudaGemmConfig::default_for(problem(1024, 1024, 8192, DType::bf16, row, col), sm90a);
  EXPECT_EQ(deep.math, CudaMath::Wgmma);
  EXPECT_TRUE(deep.split_k > 1 || deep.stream_k > 0);
  EXPECT_EQ(CudaGemmConfig::default_for(problem(8192, 8192, 8192, DType::bf16, row, col), sm90a).split_k, 1);
  expect_rule(rc, wg.with_overrides("align_a=4"), sm90a, "16-byte aligned");
  expect_rule(rc, wg.with_overrides("block_n=256,warp_n=256,stages=8"), sm90a, "exceeds sm_90a's");
}

TEST(CudaGemmConfig, OverridesRejectUnknownKeysAndMalformedItems) {
  EXPECT_THROW(CudaGemmConfig().with_overrides("block_q=4"), InvalidArgument);
  EXPECT_THROW(CudaGemmConfig().with_overrides("block_m"), InvalidArgument);
  EXPECT_THROW(CudaGemmConfig().with_overrides("block_m=x"), InvalidArgument);
  EXPECT_EQ(CudaGemmConfig().with_overrides("block_m=64,stages=2").block_m, 64);
}

TEST(CudaGemmSpec, JsonRoundTripHashAndName) {
  const CudaTarget t = CudaTarget::parse("cuda:sm_90");
  GemmProblem p = problem(300, 200, 100, DType::bf16, Layout::row_major(), Layout::col_major());
  p.signature.epilogue = Epilogue::parse("gelu(acc + bias[n])");
  p.signature.inputs = {{"bias", IndexForm::N, {DType::f32, Layout::row_major()}}};
  const CudaGemmSpec spec{p.signature, CudaGemmConfig::default_for(p, t), t};
  const CudaGemmSpec back = from_json<CudaGemmSpec>(nlohmann::json::parse(spec.canonical_json()));
  EXPECT_EQ(back.canonical_json(), spec.canonical_json());
  EXPECT_EQ(back.hash(), spec.hash());
  EXPECT_EQ(spec.name(), back.name());
  EXPECT_TRUE(spec.name().starts_with("gemm_bf16bf16f32_rczr_tc")) << spec.name();
  EXPECT_NE(spec.name().find("gelu_bias_sm90"), std::string::npos) << spec.name();
  CudaGemmSpec other = spec;
  other.config.stages = spec.config.stages == 3 ? 4 : 3;
  EXPECT_NE(other.hash(), spec.hash());
  // Invalid combinations are refused on the way in, malformed JSON with InvalidArgument.
  nlohmann::json j = to_json(spec);
  j["config"]["warp_m"] = 24;
  EXPECT_THROW(from_json<CudaGemmSpec>(j), ConfigError);
  j = to_json(spec);
  j["config"].erase("stages");
  EXPECT_THROW(from_json<CudaGemmSpec>(j), InvalidArgument);
  j = to_json(spec);
  j["target"] = "cuda:sm_75";
  EXPECT_THROW(from_json<CudaGemmSpec>(j), InvalidArgument);
}

}  // namespace
}  // namespace tessera
