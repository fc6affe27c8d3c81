// The CUDA attention kernels before the runtime launches them — FlashAttention-2's on mma.sync
// (templates/tessera/attention/flash_forward.cuh) and the Hopper one on TMA and wgmma (flash_forward_wgmma.cuh):
// NVRTC compiles each configuration (sm_80 and sm_90; sm_90a) without spills and with the instructions it claims; the
// SIMT emulator runs it against the double-precision reference (f16 and bf16, causal or not, GQA, edges, keys split
// across blocks and merged by the combine kernel); seeded bugs in either are caught.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <span>

#include "generator/core/cuda_target.hpp"
#include "generator/core/dtype.hpp"
#include "jit/nvrtc.hpp"
#include "jit/simt_emulator.hpp"
#include "jit/tma_tensor.hpp"
#include "tessera/attention/attention_params.cuh"
#include "tessera/cuda.hpp"
#include "tessera/reference.hpp"
#include "tests/cuda/template_mutation.hpp"

namespace tessera {
namespace {

// A [1, h, seq, d] f16 tensor (BHSD, dense) of values uniform in [-1, 1] in `bits`.
Tensor random_bhsd(std::vector<std::uint16_t>& bits, int h, int seq, int d, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1, 1);
  bits.resize(static_cast<std::size_t>(h * seq * d));
  for (auto& x : bits) x = to_f16(dist(rng));
  return Tensor{bits.data(), DType::f16, {1, h, seq, d}, {h * seq * d, seq * d, d, 1}};
}

struct FlashConfig {
  bool bf16 = false;
  int d = 64, bc = 64, warps = 4;
  bool causal = false;
  bool wgmma = false;  // the Hopper kernel: `warps` consumer warps beside a producer warpgroup, two TMA stages
  int rows() const { return 16 * warps; }
  int threads() const { return 32 * warps + (wgmma ? 128 : 0); }
  int shared_bytes() const { return wgmma ? rows() * d * 2 + 4 * bc * d * 2 + 8 * 7 : rows() * d * 2 + 4 * bc * d * 2; }
  std::string name() const {
    return fmt::format("flash_{}_d{}_bc{}_w{}{}{}", bf16 ? "bf16" : "f16", d, bc, warps, causal ? "_causal" : "",
                       wgmma ? "_wgmma" : "");
  }
  const char* header() const {
    return wgmma ? "tessera/attention/flash_forward_wgmma.cuh" : "tessera/attention/flash_forward.cuh";
  }
  // The kernel's source; `kernel_text` (a template, mutated, and what includes it) replaces its #include when given.
  std::string source(const std::string& kernel_text = "") const {
    const std::string kernel = kernel_text.empty() ? fmt::format("#include \"{}\"", header()) : kernel_text;
    const std::string config = fmt::format(R"({}
struct Identity {{
  static constexpr bool kIdentity = true;
}};
struct Config {{
  using Mod = Identity;
  using Element = tessera::{};
  static constexpr int kInput = tessera::{};
  static constexpr int D = {}, BC = {}, Warps = {}, Align = 8, Stages = 2;
  static constexpr bool Causal = {};
}};
)",
                                           kernel, bf16 ? "bfloat16_t" : "half_t", bf16 ? "kInputBf16" : "kInputF16", d,
                                           bc, warps, causal ? "true" : "false");
    if (wgmma)
      return config + fmt::format(R"(
extern "C" __global__ void __launch_bounds__({0}, 1) {1}(const __grid_constant__ tessera::AttentionParams p) {{
  tessera::flash_forward_wgmma<Config>(p);
}}
)",
                                  threads(), name());
    return config + fmt::format(R"(
extern "C" __global__ void __launch_bounds__({0}) {1}(const tessera::AttentionParams p) {{
  tessera::flash_forward<Config>(p);
}}
extern "C" __global__ void __launch_bounds__({0}) {1}_combine(const tessera::AttentionParams p) {{
  tessera::flash_combine<Config>(p);
}}
)",
                                threads(), name());
  }
};

std::vector<FlashConfig> configs() {
  std::vector<FlashConfig> out;
  for (bool bf16 : {false, true})
    for (int d : {32, 64, 96, 128})
      for (bool causal : {false, true}) out.push_back({bf16, d, d > 64 ? 32 : 64, 4, causal});
  return out;
}

// The Hopper kernel's configurations: the default (128 keys, two consumer warpgroups) and one consumer warpgroup with
// 64 keys.
std::vector<FlashConfig> wgmma_configs() {
  std::vector<FlashConfig> out;
  for (bool bf16 : {false, true})
    for (int d : {64, 128})
      for (bool causal : {false, true}) {
        out.push_back({bf16, d, 128, 8, causal, true});
        out.push_back({bf16, d, 64, 4, causal, true});
      }
  return out;
}

TEST(FlashAttentionCuda, HopperKernelCompilesWithoutSpills) {
  for (const FlashConfig& c : wgmma_configs()) {
    const CudaBinary binary = Nvrtc::instance().compile(c.source(), c.name(), CudaTarget::parse("cuda:sm_90a"), true);
    const KernelResources& r = binary.resources.at(c.name());
    EXPECT_EQ(r.spill_store_bytes + r.spill_load_bytes, 0) << c.name();
    EXPECT_LE(r.registers, 65536 / c.threads()) << c.name();  // one block of this size fits an SM's registers
    const PtxCounts ptx = count_ptx(binary.ptx);
    EXPECT_EQ(ptx.wgmma, 2 * (c.d / 16) + c.bc / 16) << c.name();  // S's k-steps (first block, loop), P·V's
    EXPECT_GT(ptx.tma, 0) << c.name();
    EXPECT_EQ(ptx.mma, 0) << c.name();
    EXPECT_EQ(ptx.local_access, 0) << c.name();
    // Two consumers: the register hand-over and the ping-pong's turns are in the code; one consumer needs neither.
    const bool two = c.warps == 8;
    EXPECT_EQ(binary.ptx.find("setmaxnreg.inc.sync.aligned.u32 232") != std::string::npos, two) << c.name();
    EXPECT_EQ(binary.ptx.find("bar.arrive") != std::string::npos, two) << c.name();
  }
}

TEST(FlashAttentionCuda, CompilesWithoutSpillsForAmpereAndHopper) {
  for (const FlashConfig& c : configs())
    for (const char* arch : {"cuda:sm_80", "cuda:sm_90"}) {
      const CudaBinary binary = Nvrtc::instance().compile(c.source(), c.name(), CudaTarget::parse(arch), true);
      for (const std::string& kernel : {c.name(), c.name() + "_combine"}) {
        const KernelResources& r = binary.resources.at(kernel);
        EXPECT_EQ(r.spill_store_bytes + r.spill_load_bytes, 0) << kernel << " " << arch;
        EXPECT_LE(r.registers, 255) << kernel << " " << arch;
      }
      const PtxCounts ptx = count_ptx(binary.ptx);
      EXPECT_GT(ptx.mma, 0) << c.name();
      EXPECT_GT(ptx.ldmatrix, 0) << c.name();
      EXPECT_GT(ptx.cp_async, 0) << c.name();
      EXPECT_EQ(ptx.local_access, 0) << c.name() << " " << arch;
    }
}

// Q, K, V in 16-bit storage (BHSD, dense) with f32 copies of the same values for the reference.
struct Problem {
  int batch = 1, heads = 2, kv_heads = 1, seq_q = 37, seq_kv = 70;
  int splits = 1;  // key splits merged by the combine kernel
};

// Runs the kernel and returns how many outputs miss the reference (with the first in `first`).
std::size_t mismatches(const FlashConfig& c, const Problem& pr, const EmuModule& module, std::string& first) {
  const int d = c.d;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1, 1);
  const auto count = [&](int heads, int seq) { return static_cast<std::size_t>(pr.batch * heads * seq * d); };
  std::vector<std::uint16_t> q16(count(pr.heads, pr.seq_q)), k16(count(pr.kv_heads, pr.seq_kv)),
      v16(count(pr.kv_heads, pr.seq_kv)), o16(count(pr.heads, pr.seq_q), 0x7e00);
  std::vector<float> q(q16.size()), k(k16.size()), v(v16.size()), o(o16.size()), lse(pr.batch * pr.heads * pr.seq_q);
  const auto fill = [&](std::vector<std::uint16_t>& bits, std::vector<float>& values) {
    for (std::size_t i = 0; i < bits.size(); ++i) {
      const float x = dist(rng);
      bits[i] = c.bf16 ? to_bf16(x) : to_f16(x);
      values[i] = c.bf16 ? from_bf16(bits[i]) : from_f16(bits[i]);
    }
  };
  fill(q16, q), fill(k16, k), fill(v16, v);
  AttentionParams p{};
  p.q = q16.data(), p.k = k16.data(), p.v = v16.data(), p.o = o16.data(), p.lse = lse.data();
  p.q_bs = pr.heads * pr.seq_q * d, p.q_hs = pr.seq_q * d, p.q_ss = d;
  p.k_bs = pr.kv_heads * pr.seq_kv * d, p.k_hs = pr.seq_kv * d, p.k_ss = d;
  p.v_bs = p.k_bs, p.v_hs = p.k_hs, p.v_ss = d;
  p.o_bs = p.q_bs, p.o_hs = p.q_hs, p.o_ss = d;
  p.lse_bs = pr.heads * pr.seq_q, p.lse_hs = pr.seq_q;
  p.batch = pr.batch, p.heads = pr.heads, p.kv_heads = pr.kv_heads, p.seq_q = pr.seq_q, p.seq_kv = pr.seq_kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  p.scale_log2 = scale * 1.4426950408889634f;
  EmuLaunch launch;
  launch.kernel = c.name();
  launch.grid_x = static_cast<unsigned>((pr.seq_q + c.rows() - 1) / c.rows() * pr.heads);
  launch.grid_z = static_cast<unsigned>(pr.batch);
  launch.block = static_cast<unsigned>(c.threads());
  launch.shared_bytes = static_cast<unsigned>(c.shared_bytes());
  if (c.wgmma) {
    // Dense BHSD: the batch folds into the planes (heads), boxes of 64 columns by the tile's rows.
    const auto map = [&](const std::vector<std::uint16_t>& x, int heads, int seq, int box_rows) {
      TmaTensor t;
      t.global = x.data(), t.element_bytes = 2;
      t.dims = {static_cast<std::uint64_t>(d), static_cast<std::uint64_t>(seq),
                static_cast<std::uint64_t>(pr.batch * heads)};
      t.stride_bytes = {static_cast<std::uint64_t>(d * 2), static_cast<std::uint64_t>(seq * d * 2)};
      t.box = {64, static_cast<unsigned>(box_rows), 1};
      t.swizzle_bytes = 128;
      return emulated_tma_descriptor(t);
    };
    std::memcpy(&p.q_map, map(q16, pr.heads, pr.seq_q, c.rows()).data(), sizeof p.q_map);
    std::memcpy(&p.k_map, map(k16, pr.kv_heads, pr.seq_kv, c.bc).data(), sizeof p.k_map);
    std::memcpy(&p.v_map, map(v16, pr.kv_heads, pr.seq_kv, c.bc).data(), sizeof p.v_map);
    p.tma_planes[0] = pr.heads, p.tma_planes[1] = p.tma_planes[2] = pr.kv_heads;
  }
  const auto bytes = std::as_bytes(std::span(&p, 1));
  launch.params.assign(bytes.begin(), bytes.end());
  launch.global = {{q16.data(), q16.size() * 2},
                   {k16.data(), k16.size() * 2},
                   {v16.data(), v16.size() * 2},
                   {o16.data(), o16.size() * 2},
                   {lse.data(), lse.size() * 4}};
  // Split keys: each split's rows in f32 (NaN until written), keys in chunks of whole key blocks.
  const std::size_t partial_rows = static_cast<std::size_t>(pr.splits * pr.heads * pr.batch * pr.seq_q);
  std::vector<float> o_partial(partial_rows * static_cast<std::size_t>(d), NAN), lse_partial(partial_rows, NAN);
  if (pr.splits > 1) {
    p.o_partial = o_partial.data(), p.lse_partial = lse_partial.data();
    p.partial_bs = pr.seq_q, p.partial_rows = pr.batch * pr.seq_q;
    p.kv_splits = pr.splits;
    p.kv_chunk = ((pr.seq_kv + c.bc - 1) / c.bc + pr.splits - 1) / pr.splits * c.bc;
    launch.grid_x *= static_cast<unsigned>(pr.splits);
    launch.global.push_back({o_partial.data(), o_partial.size() * 4});
    launch.global.push_back({lse_partial.data(), lse_partial.size() * 4});
    const auto with_splits = std::as_bytes(std::span(&p, 1));
    launch.params.assign(with_splits.begin(), with_splits.end());
  }
  module.launch(launch);
  if (pr.splits > 1) {
    launch.kernel = c.name() + "_combine";
    launch.grid_x /= static_cast<unsigned>(pr.splits);
    module.launch(launch);
  }
  for (std::size_t i = 0; i < o.size(); ++i) o[i] = c.bf16 ? from_bf16(o16[i]) : from_f16(o16[i]);

  // The reference on the same (rounded) values, through the CPU API's views.
  const auto view = [&](std::vector<float>& x, int heads, int seq) {
    return Tensor{x.data(), DType::f32, {pr.batch, heads, seq, d}, {heads * seq * d, seq * d, d, 1}};
  };
  AttentionArgs args;
  args.q = view(q, pr.heads, pr.seq_q), args.k = view(k, pr.kv_heads, pr.seq_kv);
  args.v = view(v, pr.kv_heads, pr.seq_kv), args.o = view(o, pr.heads, pr.seq_q);
  args.lse = Tensor{lse.data(), DType::f32, {pr.batch, pr.heads, pr.seq_q}, {pr.heads * pr.seq_q, pr.seq_q, 1}};
  args.causal = c.causal;
  const AttentionReference ref = reference_attention(args);
  // P is rounded to 16 bits before P·V and O on the store: a few units of the format's precision.
  const double eps = c.bf16 ? 1.0 / 128 : 1.0 / 1024;
  std::size_t row = 0, bad = 0;
  for (int b = 0; b < pr.batch; ++b)
    for (int h = 0; h < pr.heads; ++h)
      for (int i = 0; i < pr.seq_q; ++i, ++row) {
        for (int x = 0; x < d; ++x) {
          const double want = ref.o[row * d + x], got = o[row * d + x];
          if (!(std::fabs(got - want) <= 2 * eps * (1 + std::fabs(want))) && bad++ == 0)
            first = fmt::format("o[{},{},{},{}] = {}, expected {}", b, h, i, x, got, want);
        }
        const double want = ref.lse[row], got = lse[row];
        if (!(std::isinf(want) ? got == want : std::fabs(got - want) <= 1e-3 * (1 + std::fabs(want))) && bad++ == 0)
          first = fmt::format("lse[{},{},{}] = {}, expected {}", b, h, i, got, want);
      }
  return bad;
}

// The Hopper kernel in the emulator: both block sizes and warpgroup counts, edges of the query and key blocks, GQA,
// causal rows that see no key (seq_q > seq_kv), one key, several batch items (planes of the TMA maps).
TEST(FlashAttentionCuda, HopperKernelMatchesTheReference) {
  for (const FlashConfig& c : wgmma_configs()) {
    const auto module = EmuModule::compile(c.source(), c.name());
    for (const Problem& pr : {Problem{1, 2, 1, 37, 70}, Problem{2, 2, 2, 129, 130}, Problem{1, 1, 1, 70, 33},
                              Problem{1, 1, 1, 5, 1}, Problem{2, 4, 2, 1, 65}}) {
      std::string first;
      EXPECT_EQ(mismatches(c, pr, *module, first), 0u)
          << c.name() << " B" << pr.batch << " H" << pr.heads << "/" << pr.kv_heads << " Sq" << pr.seq_q << " Skv"
          << pr.seq_kv << ": first " << first;
    }
  }
}

TEST(FlashAttentionCuda, EmulatorMatchesTheReference) {
  for (const FlashConfig& c : configs()) {
    const auto module = EmuModule::compile(c.source(), c.name());
    // Edges of both blocks, GQA, seq_q < seq_kv and seq_q > seq_kv (causal rows that see no key), one key.
    // Split keys: decoding rows, splits past a causal end (they see no key), more splits than a short row's blocks.
    for (const Problem& pr :
         {Problem{1, 2, 1, 37, 70}, Problem{2, 2, 2, 64, 64}, Problem{1, 1, 1, 70, 33}, Problem{1, 1, 1, 5, 1},
          Problem{1, 4, 2, 1, 300, 3}, Problem{2, 2, 1, 37, 150, 2}, Problem{1, 1, 1, 70, 33, 4}}) {
      std::string first;
      EXPECT_EQ(mismatches(c, pr, *module, first), 0u)
          << c.name() << " B" << pr.batch << " H" << pr.heads << "/" << pr.kv_heads << " Sq" << pr.seq_q << " Skv"
          << pr.seq_kv << " splits " << pr.splits << ": first " << first;
    }
  }
}

// A seeded bug: a one-line mutation of one of the attention templates.
struct AttentionBug {
  const char* file;  // relative to templates/
  TemplateBug bug;
};

// The kernel text with the bug: the mutated file, then (when it is a part the kernel includes, e.g. online_softmax.cuh
// with its include guard) the kernel's own template, whose #include of the part then adds nothing.
std::string mutated_kernel(const FlashConfig& c, const AttentionBug& b) {
  const std::string mutated = mutated_template(b.file, b.bug);
  if (mutated.empty() || b.file == std::string(c.header())) return mutated;
  return mutated + fmt::format("\n#include \"{}\"\n", c.header());
}

// Whether the emulator catches the bug in configuration c on the problems, by a wrong result or by reporting it.
bool caught(const FlashConfig& c, const AttentionBug& bug, const std::vector<Problem>& problems) {
  const std::string kernel = mutated_kernel(c, bug);
  EXPECT_FALSE(kernel.empty()) << bug.bug.what;
  bool wrong = false;
  try {
    const auto module = EmuModule::compile(c.source(kernel), c.name());
    for (const Problem& pr : problems) {
      std::string first;
      wrong = wrong || mismatches(c, pr, *module, first) > 0;
    }
  } catch (const EmulationError& e) {
    wrong = true;  // the emulator reported the bug (a race, a read of unwritten shared memory)
  }
  return wrong;
}

// Seeded bugs, each a one-line mutation: the emulator must catch every one, by a wrong result or by reporting it.
TEST(FlashAttentionCuda, SeededBugsAreCaught) {
  constexpr const char* kSoftmax = "tessera/attention/online_softmax.cuh";
  constexpr const char* kFlash2 = "tessera/attention/flash_forward.cuh";
  const std::vector<AttentionBug> bugs{
      {kFlash2, {"(control: the template as it is)", "", ""}},
      {kSoftmax, {"no rescale of O", "o[i][0] *= rescale[0], o[i][1] *= rescale[0];", "(void)0;"}},
      {kSoftmax,
       {"causal bound off by one", "visible = visible && j <= st.row[r] + diagonal;",
        "visible = visible && j < st.row[r] + diagonal;"}},
      {kFlash2,
       {"next K/V tile read before its cp.async wait", "    cp_async_wait<0>();\n    __syncthreads();\n  }",
        "    __syncthreads();\n  }"}},
      {kFlash2,
       {"split key ranges overlapping", "block_begin + chunk_blocks ? block_end : block_begin + chunk_blocks;",
        "block_begin + chunk_blocks + 1 ? block_end : block_begin + chunk_blocks + 1;"}},
      {kFlash2, {"splits merged without their weights", "acc += w * ld_global", "acc += ld_global"}},
  };
  FlashConfig c;
  c.causal = true;
  for (const AttentionBug& bug : bugs)
    EXPECT_EQ(caught(c, bug, {Problem{1, 2, 1, 37, 150}, Problem{1, 1, 1, 70, 200}, Problem{1, 2, 1, 3, 300, 3}}),
              !bug.bug.control())
        << bug.bug.what << (bug.bug.control() ? " failed" : " was not caught");
}

// The same for the Hopper kernel (one consumer warpgroup, 64 keys a block: three blocks pass through two stages).
TEST(FlashAttentionCuda, HopperKernelSeededBugsAreCaught) {
  constexpr const char* kSoftmax = "tessera/attention/online_softmax.cuh";
  constexpr const char* kHopper = "tessera/attention/flash_forward_wgmma.cuh";
  const std::vector<AttentionBug> bugs{
      {kHopper, {"(control: the template as it is)", "", ""}},
      {kSoftmax, {"no rescale of O", "o[i][0] *= rescale[0], o[i][1] *= rescale[0];", "(void)0;"}},
      {kSoftmax,
       {"causal bound off by one", "visible = visible && j <= st.row[r] + diagonal;",
        "visible = visible && j < st.row[r] + diagonal;"}},
      {kHopper,
       {"V read before its TMA load completes", "    mbarrier_wait(flash_barrier<T>(1, stage(block)), phase(block));\n",
        ""}},
      {kHopper,
       {"K read before its TMA load completes", "    mbarrier_wait(flash_barrier<T>(0, stage(block)), phase(block));\n",
        ""}},
      {kHopper, {"the next block's softmax before its scores land", "      wgmma_wait<1>();", ""}},
      {kHopper,
       {"O rescaled before its P·V retires", "    wgmma_wait<0>();\n    mbarrier_arrive", "    mbarrier_arrive"}},
      {kHopper,
       {"the producer refills a stage without waiting for its release",
        "        mbarrier_wait(flash_barrier<T>(2, s), phase ^ 1u);", ""}},
      {kHopper, {"V read K-major (no transpose)", "wgmma_rs<kWgmmaIn, T::D, 1>", "wgmma_rs<kWgmmaIn, T::D, 0>"}},
  };
  const FlashConfig c{false, 64, 64, 4, true, true};
  for (const AttentionBug& bug : bugs)
    EXPECT_EQ(caught(c, bug, {Problem{1, 2, 1, 37, 150}, Problem{1, 1, 1, 70, 200}}), !bug.bug.control())
        << bug.bug.what << (bug.bug.control() ? " failed" : " was not caught");
  // Two consumers taking turns: a broken hand-over deadlocks, which the emulator reports.
  const std::vector<AttentionBug> pingpong{
      {kHopper, {"(control: the template as it is)", "", ""}},
      {kHopper, {"consumer 1 never gives consumer 0 the first turn", "if (c == 1) named_barrier_arrive(1, 256);", ""}},
      {kHopper,
       {"a consumer hands the turn to itself", "named_barrier_arrive(2 - c, 256);",
        "named_barrier_arrive(1 + c, 256);"}},
  };
  const FlashConfig two{false, 64, 64, 8, false, true};
  for (const AttentionBug& bug : pingpong)
    EXPECT_EQ(caught(two, bug, {Problem{1, 1, 1, 100, 200}}), !bug.bug.control())
        << bug.bug.what << (bug.bug.control() ? " failed" : " was not caught");
}

// How many key splits a launch runs: none where the query blocks fill the SMs, several for decoding, each split at
// least four key blocks, a forced count clamped to the key blocks.
TEST(FlashAttentionCuda, KeySplitsFillTheSms) {
  const CudaTarget a100 = CudaTarget::parse("cuda:sm_80");
  const auto problem = [](std::int64_t batch, std::int64_t heads, std::int64_t sq, std::int64_t skv) {
    AttentionProblem p;
    p.batch = batch, p.heads = heads, p.kv_heads = heads, p.seq_q = sq, p.seq_kv = skv;
    p.signature.dtype = DType::f16, p.signature.head_dim_qk = p.signature.head_dim_v = 128;
    return p;
  };
  CudaAttentionConfig c;
  c.block_kv = 32;
  EXPECT_EQ(c.key_splits(problem(1, 32, 2048, 2048), a100), 1);  // 1024 query blocks
  EXPECT_EQ(c.key_splits(problem(4, 32, 1, 4096), a100), 1);     // 128 blocks: over 80% of 108 SMs
  const int decode = c.key_splits(problem(1, 32, 1, 32768), a100);
  EXPECT_GT(decode, 1);
  EXPECT_GE(32 * decode, 0.85 * 108);                       // the grid fills most of a wave
  EXPECT_EQ(c.key_splits(problem(1, 1, 1, 100), a100), 1);  // 4 key blocks: too few to split
  const int one_head = c.key_splits(problem(1, 1, 1, 1 << 20), a100);
  EXPECT_GT(one_head, 64);
  EXPECT_LE(one_head, 128);
  c.kv_splits = 50;
  EXPECT_EQ(c.key_splits(problem(1, 1, 1, 100), a100), 4);  // clamped to the key blocks
  EXPECT_EQ(c.split_keys(problem(1, 1, 1, 100), 4), 32);
  EXPECT_EQ(c.split_keys(problem(1, 1, 1, 1000), 3), 352);  // 32 blocks: 11 a split
  // The split count is a launch choice: the same code and spec hash for every count.
  CudaAttentionConfig d = c;
  d.kv_splits = 0;
  const AttentionProblem p = problem(1, 1, 1, 100);
  EXPECT_EQ((CudaAttentionSpec{p.signature, c, a100}.hash()), (CudaAttentionSpec{p.signature, d, a100}.hash()));
}

// Through the public API: CudaRuntime::attention in the emulator, BSHD views with GQA, causal and the LSE, checked by
// compare_attention with the 16-bit weights' rounding allowed.
TEST(FlashAttentionCuda, RuntimeRunsItInTheEmulator) {
  CudaRuntime rt("cuda-emu:sm_80");
  for (bool bf16 : {false, true}) {
    const int batch = 2, heads = 4, kv_heads = 2, sq = 45, skv = 81, d = 64;
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(-1, 1);
    const auto bshd = [&](std::vector<std::uint16_t>& bits, int h, int seq) {
      bits.resize(static_cast<std::size_t>(batch * seq * h * d));
      for (auto& x : bits) x = bf16 ? to_bf16(dist(rng)) : to_f16(dist(rng));
      return Tensor{bits.data(), bf16 ? DType::bf16 : DType::f16, {batch, h, seq, d}, {seq * h * d, d, h * d, 1}};
    };
    std::vector<std::uint16_t> q, k, v, o;
    std::vector<float> lse(static_cast<std::size_t>(batch * heads * sq));
    AttentionArgs args;
    args.q = bshd(q, heads, sq), args.k = bshd(k, kv_heads, skv), args.v = bshd(v, kv_heads, skv);
    args.o = bshd(o, heads, sq);
    args.lse = Tensor{lse.data(), DType::f32, {batch, heads, sq}, {heads * sq, sq, 1}};
    args.causal = true;
    const AttentionReference ref = reference_attention(args);
    rt.attention(args);
    const Comparison c = compare_attention(ref, args, bf16 ? 1.0 / 256 : 1.0 / 2048);
    EXPECT_TRUE(c.ok()) << (bf16 ? "bf16" : "f16") << ": " << c.first_mismatch;
  }
  // Score modifiers, printed as CUDA by the same Expr printer as epilogues: one text for both back-ends.
  std::vector<float> slope{0.25f, 0.125f, 0.0625f, 0.03125f}, bias(4 * 200);
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i % 13) * 0.1f - 0.6f;
  for (const char* text : {"s - slope[h]*(i - j)", "30*tanh(s/30)", "j < i - 8 ? -inf : s * t",
                           "s + bias[h, i - j + 100]", "j >= 0 ? -inf : s"}) {
    const int heads = 4, sq = 40, skv = 60, d = 32;
    std::mt19937 rng(8);
    const auto bhsd = [&](std::vector<std::uint16_t>& bits, int h, int seq) {
      return random_bhsd(bits, h, seq, d, rng);
    };
    std::vector<std::uint16_t> q, k, v, o;
    AttentionArgs args;
    args.q = bhsd(q, heads, sq), args.k = bhsd(k, 2, skv), args.v = bhsd(v, 2, skv), args.o = bhsd(o, heads, sq);
    args.causal = std::string(text).find("j < i") != std::string::npos;
    args.set_score_mod(text);
    for (const auto& use : args.score_mod.tensors()) {
      if (use.name == "slope") args.tensors["slope"] = Tensor{slope.data(), DType::f32, {4}, {1}};
      if (use.name == "bias") args.tensors["bias"] = Tensor{bias.data(), DType::f32, {4, 200}, {200, 1}};
    }
    for (const auto& name : args.score_mod.scalars()) args.scalars[name] = 0.8f;
    const AttentionReference ref = reference_attention(args);
    rt.attention(args);
    const Comparison c = compare_attention(ref, args, 1.0 / 2048);
    EXPECT_TRUE(c.ok()) << text << ": " << c.first_mismatch;
  }

  // Variable lengths with empty sequences (a query-less item, a key-less one), causal or not, with the LSE.
  for (bool causal : {false, true}) {
    const std::vector<std::int64_t> q_offsets{0, 5, 5, 70, 71}, kv_offsets{0, 9, 20, 20, 100};
    const int heads = 4, kv_heads = 2, d = 64;
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> dist(-1, 1);
    const auto packed = [&](std::vector<std::uint16_t>& bits, std::int64_t total, int h) {
      bits.resize(static_cast<std::size_t>(total * h * d));
      for (auto& x : bits) x = to_f16(dist(rng));
      return Tensor{bits.data(), DType::f16, {total, h, d}, {h * d, d, 1}};
    };
    std::vector<std::uint16_t> q, k, v, o;
    std::vector<float> lse(static_cast<std::size_t>(heads * q_offsets.back()));
    AttentionArgs args;
    args.q = packed(q, q_offsets.back(), heads), args.k = packed(k, kv_offsets.back(), kv_heads);
    args.v = packed(v, kv_offsets.back(), kv_heads), args.o = packed(o, q_offsets.back(), heads);
    args.lse = Tensor{lse.data(), DType::f32, {heads, q_offsets.back()}, {q_offsets.back(), 1}};
    args.seq_offsets_q = q_offsets, args.seq_offsets_kv = kv_offsets, args.causal = causal;
    const AttentionReference ref = reference_attention(args);
    rt.attention(args);
    const Comparison c = compare_attention(ref, args, 1.0 / 2048);
    EXPECT_TRUE(c.ok()) << "varlen" << (causal ? " causal" : "") << ": " << c.first_mismatch;
  }

  // Decoding through the runtime with split keys: chosen by the grid (2 heads fill few SMs) or forced, GQA, the LSE,
  // causal queries below a longer key sequence, and a varlen batch whose second item has no keys.
  for (const auto& [causal, splits, varlen] : {std::tuple{false, 0, false}, std::tuple{true, 3, false},
                                               std::tuple{false, 5, true}, std::tuple{true, 0, true}}) {
    const int heads = 4, kv_heads = 2, sq = 3, skv = 700, d = 64;
    std::mt19937 rng(6);
    std::uniform_real_distribution<float> dist(-1, 1);
    const auto bhsd = [&](std::vector<std::uint16_t>& bits, int h, int seq) {
      bits.resize(static_cast<std::size_t>(h * seq * d));
      for (auto& x : bits) x = to_f16(dist(rng));
      return Tensor{bits.data(), DType::f16, {1, h, seq, d}, {h * seq * d, seq * d, d, 1}};
    };
    const auto packed = [&](std::vector<std::uint16_t>& bits, std::int64_t total, int h) {
      bits.resize(static_cast<std::size_t>(total * h * d));
      for (auto& x : bits) x = to_f16(dist(rng));
      return Tensor{bits.data(), DType::f16, {total, h, d}, {h * d, d, 1}};
    };
    const std::vector<std::int64_t> q_offsets{0, 2, 4, 5}, kv_offsets{0, 500, 500, 900};
    std::vector<std::uint16_t> q, k, v, o;
    std::vector<float> lse;
    AttentionArgs args;
    if (varlen) {
      args.q = packed(q, 5, heads), args.k = packed(k, 900, kv_heads), args.v = packed(v, 900, kv_heads);
      args.o = packed(o, 5, heads);
      lse.resize(heads * 5);
      args.lse = Tensor{lse.data(), DType::f32, {heads, 5}, {5, 1}};
      args.seq_offsets_q = q_offsets, args.seq_offsets_kv = kv_offsets;
    } else {
      args.q = bhsd(q, heads, sq), args.k = bhsd(k, kv_heads, skv), args.v = bhsd(v, kv_heads, skv);
      args.o = bhsd(o, heads, sq);
      lse.resize(heads * sq);
      args.lse = Tensor{lse.data(), DType::f32, {1, heads, sq}, {heads * sq, sq, 1}};
    }
    args.causal = causal;
    const AttentionProblem problem = describe_attention(args);
    CudaAttentionConfig config = CudaAttentionConfig::default_for(problem, CudaTarget::parse("cuda:sm_80"));
    config.kv_splits = splits;
    EXPECT_GT(config.key_splits(problem, CudaTarget::parse("cuda:sm_80")), 1) << splits;
    const AttentionReference ref = reference_attention(args);
    rt.attention(args, config);
    const Comparison c = compare_attention(ref, args, 1.0 / 2048);
    EXPECT_TRUE(c.ok()) << "decoding, splits " << splits << (causal ? " causal" : "") << (varlen ? " varlen" : "")
                        << ": " << c.first_mismatch;
  }

  // One query a head with grouped heads (GQA 4:1 and MQA 8:1): a KV head's query heads run as one block's rows, with
  // or without split keys; causal, the LSE, BSHD and BHSD. A score modifier (it may read h or i) keeps them apart.
  for (const auto& [heads, kv_heads, causal, bshd, modifier] :
       {std::tuple{8, 2, true, false, ""}, std::tuple{8, 1, false, true, ""}, std::tuple{8, 2, false, true, "s*t"},
        std::tuple{4, 4, true, false, ""}}) {
    const int batch = 2, skv = 333, d = 64;
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> dist(-1, 1);
    const auto view = [&](std::vector<std::uint16_t>& bits, int h, int seq) {
      bits.resize(static_cast<std::size_t>(batch * h * seq * d));
      for (auto& x : bits) x = to_f16(dist(rng));
      return bshd ? Tensor{bits.data(), DType::f16, {batch, h, seq, d}, {seq * h * d, d, h * d, 1}}
                  : Tensor{bits.data(), DType::f16, {batch, h, seq, d}, {h * seq * d, seq * d, d, 1}};
    };
    std::vector<std::uint16_t> q, k, v, o;
    std::vector<float> lse(static_cast<std::size_t>(batch * heads));
    AttentionArgs args;
    args.q = view(q, heads, 1), args.k = view(k, kv_heads, skv), args.v = view(v, kv_heads, skv);
    args.o = view(o, heads, 1);
    args.lse = Tensor{lse.data(), DType::f32, {batch, heads, 1}, {heads, 1, 1}};
    args.causal = causal;
    if (*modifier) {
      args.set_score_mod(modifier);
      args.scalars["t"] = 0.5f;
    }
    const CudaAttentionLaunchPlan plan = rt.attention_plan(args);
    EXPECT_EQ(plan.stacked_heads, heads > kv_heads && !*modifier) << heads << "/" << kv_heads << " " << modifier;
    for (int splits : {0, 1, 3}) {
      CudaAttentionConfig config = plan.config;
      config.kv_splits = splits;
      std::fill(o.begin(), o.end(), std::uint16_t{0x7e00});
      std::fill(lse.begin(), lse.end(), NAN);
      const AttentionReference ref = reference_attention(args);
      rt.attention(args, config);
      const Comparison c = compare_attention(ref, args, 1.0 / 2048);
      EXPECT_TRUE(c.ok()) << "decoding " << heads << "/" << kv_heads << (causal ? " causal" : "")
                          << (bshd ? " bshd" : " bhsd") << " '" << modifier << "' splits " << splits << ": "
                          << c.first_mismatch;
    }
  }

  // What the kernel cannot do is refused before anything runs.
  AttentionArgs bad;
  std::vector<std::uint16_t> x(4 * 8 * 80);
  const Tensor t{x.data(), DType::f16, {1, 1, 8, 80}, {640, 640, 80, 1}};
  bad.q = bad.k = bad.v = t;
  std::vector<std::uint16_t> y(x.size());
  bad.o = Tensor{y.data(), DType::f16, {1, 1, 8, 80}, {640, 640, 80, 1}};
  EXPECT_THROW(rt.attention(bad), InvalidArgument);
}

// The Hopper kernel through the public API (cuda-emu:sm_90a, where it is the default for prefill): BSHD views with
// GQA (the batch folded into the maps' rows), BHSD (into the planes), score modifiers, a fully masked modifier, varlen
// batches with empty sequences (packed rows), each checked by compare_attention; a view TMA cannot address runs on
// the mma.sync kernel instead.
TEST(FlashAttentionCuda, HopperKernelRunsThroughTheRuntime) {
  CudaRuntime rt("cuda-emu:sm_90a");
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1, 1);
  const auto fill = [&](std::vector<std::uint16_t>& bits, std::size_t n, bool bf16) {
    bits.resize(n);
    for (auto& x : bits) x = bf16 ? to_bf16(dist(rng)) : to_f16(dist(rng));
  };
  for (const auto& [bf16, d, bshd, causal] : {std::tuple{false, 64, true, true}, std::tuple{true, 128, true, false},
                                              std::tuple{true, 64, false, true}, std::tuple{false, 128, false, true}}) {
    const int batch = 2, heads = 4, kv_heads = 2, sq = 70, skv = 133;
    const DType dtype = bf16 ? DType::bf16 : DType::f16;
    const auto view = [&](std::vector<std::uint16_t>& bits, int h, int seq) {
      fill(bits, static_cast<std::size_t>(batch * h * seq * d), bf16);
      return bshd ? Tensor{bits.data(), dtype, {batch, h, seq, d}, {seq * h * d, d, h * d, 1}}
                  : Tensor{bits.data(), dtype, {batch, h, seq, d}, {h * seq * d, seq * d, d, 1}};
    };
    std::vector<std::uint16_t> q, k, v, o;
    std::vector<float> lse(static_cast<std::size_t>(batch * heads * sq));
    AttentionArgs args;
    args.q = view(q, heads, sq), args.k = view(k, kv_heads, skv), args.v = view(v, kv_heads, skv);
    args.o = view(o, heads, sq);
    args.lse = Tensor{lse.data(), DType::f32, {batch, heads, sq}, {heads * sq, sq, 1}};
    args.causal = causal;
    EXPECT_TRUE(rt.attention_plan(args).config.wgmma) << d << (bshd ? " bshd" : " bhsd");
    const AttentionReference ref = reference_attention(args);
    rt.attention(args);
    const Comparison c = compare_attention(ref, args, bf16 ? 1.0 / 256 : 1.0 / 2048);
    EXPECT_TRUE(c.ok()) << (bf16 ? "bf16" : "f16") << " d" << d << (bshd ? " bshd" : " bhsd")
                        << (causal ? " causal: " : ": ") << c.first_mismatch;
  }
  std::vector<float> slope{0.25f, 0.125f}, bias(2 * 300);
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i % 13) * 0.1f - 0.6f;
  for (const char* text : {"s - slope[h]*(i - j)", "30*tanh(s/30)", "j < i - 40 ? -inf : s", "s + bias[h, i - j + 150]",
                           "j >= 0 ? -inf : s"}) {
    const int heads = 2, sq = 90, skv = 140, d = 64;
    std::vector<std::uint16_t> q, k, v, o;
    fill(q, heads * sq * d, false), fill(k, heads * skv * d, false), fill(v, heads * skv * d, false);
    fill(o, heads * sq * d, false);
    AttentionArgs args;
    args.q = Tensor{q.data(), DType::f16, {1, heads, sq, d}, {heads * sq * d, sq * d, d, 1}};
    args.k = Tensor{k.data(), DType::f16, {1, heads, skv, d}, {heads * skv * d, skv * d, d, 1}};
    args.v = Tensor{v.data(), DType::f16, {1, heads, skv, d}, {heads * skv * d, skv * d, d, 1}};
    args.o = Tensor{o.data(), DType::f16, {1, heads, sq, d}, {heads * sq * d, sq * d, d, 1}};
    args.causal = std::string(text).find("j < i") != std::string::npos;
    args.set_score_mod(text);
    for (const auto& use : args.score_mod.tensors()) {
      if (use.name == "slope") args.tensors["slope"] = Tensor{slope.data(), DType::f32, {2}, {1}};
      if (use.name == "bias") args.tensors["bias"] = Tensor{bias.data(), DType::f32, {2, 300}, {300, 1}};
    }
    EXPECT_TRUE(rt.attention_plan(args).config.wgmma) << text;
    const AttentionReference ref = reference_attention(args);
    rt.attention(args);
    const Comparison c = compare_attention(ref, args, 1.0 / 2048);
    EXPECT_TRUE(c.ok()) << text << ": " << c.first_mismatch;
  }
  for (bool causal : {false, true}) {
    const std::vector<std::int64_t> q_offsets{0, 5, 5, 140, 141}, kv_offsets{0, 9, 20, 20, 230};
    const int heads = 4, kv_heads = 2, d = 128;
    std::vector<std::uint16_t> q, k, v, o;
    fill(q, static_cast<std::size_t>(q_offsets.back() * heads * d), true);
    fill(k, static_cast<std::size_t>(kv_offsets.back() * kv_heads * d), true);
    fill(v, k.size(), true), fill(o, q.size(), true);
    std::vector<float> lse(static_cast<std::size_t>(heads * q_offsets.back()));
    AttentionArgs args;
    args.q = Tensor{q.data(), DType::bf16, {q_offsets.back(), heads, d}, {heads * d, d, 1}};
    args.k = Tensor{k.data(), DType::bf16, {kv_offsets.back(), kv_heads, d}, {kv_heads * d, d, 1}};
    args.v = Tensor{v.data(), DType::bf16, {kv_offsets.back(), kv_heads, d}, {kv_heads * d, d, 1}};
    args.o = Tensor{o.data(), DType::bf16, {q_offsets.back(), heads, d}, {heads * d, d, 1}};
    args.lse = Tensor{lse.data(), DType::f32, {heads, q_offsets.back()}, {q_offsets.back(), 1}};
    args.seq_offsets_q = q_offsets, args.seq_offsets_kv = kv_offsets, args.causal = causal;
    EXPECT_TRUE(rt.attention_plan(args).config.wgmma);
    const AttentionReference ref = reference_attention(args);
    rt.attention(args);
    const Comparison c = compare_attention(ref, args, 1.0 / 256);
    EXPECT_TRUE(c.ok()) << "varlen" << (causal ? " causal" : "") << ": " << c.first_mismatch;
  }
  // Rows 68 elements apart (136 bytes: not a multiple of 16) cannot be TMA's: the mma.sync kernel takes the call.
  {
    const int sq = 50, d = 64, pitch = 68;
    std::vector<std::uint16_t> q, k, v, o;
    fill(q, sq * pitch, false), fill(k, sq * pitch, false), fill(v, sq * pitch, false), fill(o, sq * pitch, false);
    const auto view = [&](std::vector<std::uint16_t>& bits) {
      return Tensor{bits.data(), DType::f16, {1, 1, sq, d}, {sq * pitch, sq * pitch, pitch, 1}};
    };
    AttentionArgs args;
    args.q = view(q), args.k = view(k), args.v = view(v), args.o = view(o);
    EXPECT_FALSE(rt.attention_plan(args).config.wgmma);
    const AttentionReference ref = reference_attention(args);
    rt.attention(args);
    const Comparison c = compare_attention(ref, args, 1.0 / 2048);
    EXPECT_TRUE(c.ok()) << "unaligned rows: " << c.first_mismatch;
  }
}

// Decoding with the keys split across the grid (flash-decoding): each split's f32 partial rows leave as 8-byte pairs,
// so every store request covers its rows' 32-byte sectors whole (with scalar stores the launch stored 1.9 times the
// sectors its bytes need), and the result still matches the reference.
TEST(FlashAttentionCuda, DecodingPartialRowsAreStoredWhole) {
  EmuProfile profile;
  EmuOptions options;
  options.profile = &profile;
  CudaRuntime rt("cuda-emu:sm_80", options);
  const int heads = 8, kv_heads = 2, skv = 2048, d = 64;
  std::mt19937 rng(4);
  const auto bhsd = [&](std::vector<std::uint16_t>& bits, int h, int seq) { return random_bhsd(bits, h, seq, d, rng); };
  std::vector<std::uint16_t> q, k, v, o;
  AttentionArgs args;
  args.q = bhsd(q, heads, 1), args.k = bhsd(k, kv_heads, skv), args.v = bhsd(v, kv_heads, skv);
  args.o = bhsd(o, heads, 1);
  ASSERT_GT(rt.attention_plan(args).kv_splits, 1) << "the test wants split keys";
  const AttentionReference ref = reference_attention(args);
  rt.attention(args);
  const Comparison c = compare_attention(ref, args, 1.0 / 2048);
  EXPECT_TRUE(c.ok()) << c.first_mismatch;
  EXPECT_GT(profile.global_store.requests, 0u);
  // Within a tenth of the ideal (the combine kernel's and the LSE's few stores are not all whole sectors).
  EXPECT_LE(static_cast<double>(profile.global_store.transactions),
            1.1 * static_cast<double>(profile.global_store.ideal))
      << "partial rows stored in pieces";
}

}  // namespace
}  // namespace tessera
