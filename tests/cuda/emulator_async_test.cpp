// Hopper's asynchronous pipeline in the SIMT emulator: mbarriers and TMA loads with their documented semantics
// (phases and parities, transaction bytes, the 128-byte swizzle, zeros outside the tensor), and the bugs a pipeline
// can have — each seeded into a correct kernel and each reported (a race, a deadlock naming the barrier, or wrong
// data). The same kernel compiles for sm_90a through NVRTC with the PTX instructions it names.
#include <gtest/gtest.h>

#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "generator/core/dtype.hpp"
#include "jit/nvrtc.hpp"
#include "jit/simt_emulator.hpp"
#include "tessera/arch/tma_descriptor.cuh"

namespace tessera {
namespace {

// The kernel's parameters, compiled here and pasted into the kernel's source, so the two agree by construction.
#define PIPELINE_PARAMS   \
  struct PipelineParams { \
    TmaDescriptor map;    \
    float* out;           \
    int rows, cols;       \
  };
PIPELINE_PARAMS
#define TESSERA_STRINGIFY2(...) #__VA_ARGS__
#define TESSERA_STRINGIFY(...) TESSERA_STRINGIFY2(__VA_ARGS__)

// A producer warp (lane 0) streams 32x8 boxes of a row-major f32 matrix through a two-stage ring in shared memory
// with TMA (128-byte swizzle); two consumer warps wait for each stage, copy its box out (unswizzling) into an
// output padded to whole boxes, and release the stage. full[s] counts the producer's one arrival and the box's
// bytes; empty[s] the 64 consumers' arrivals.
const char* kPipeline = R"(
constexpr int kStages = 2, kBoxX = 32, kBoxY = 8;
constexpr unsigned kStageBytes = kBoxX * kBoxY * 4;
TESSERA_DEVICE unsigned swizzle_128(unsigned o) { return o ^ (((o >> 7) & 7u) << 4); }

extern "C" __global__ void pipeline(const __grid_constant__ PipelineParams p) {
  const int t = threadIdx.x;
  const u32 full0 = kStages * kStageBytes, empty0 = full0 + 8 * kStages;
  const int tiles_x = (p.cols + kBoxX - 1) / kBoxX, tiles = tiles_x * ((p.rows + kBoxY - 1) / kBoxY);
  if (t == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full0 + 8 * s, 1);
      mbarrier_init(empty0 + 8 * s, 64);
    }
    fence_barrier_init();
  }
  INIT_BARRIER
  if (t == 0) {
    for (int i = 0; i < tiles; ++i) {
      const int s = i % kStages;
      const u32 phase = (i / kStages) & 1;
      EMPTY_WAIT
      mbarrier_arrive_expect_tx(full0 + 8 * s, EXPECTED_BYTES);
      tma_load_2d(s * kStageBytes, &p.map, (i % tiles_x) * kBoxX, (i / tiles_x) * kBoxY, full0 + 8 * s);
    }
  } else if (t >= 32) {
    const int c = t - 32;
    for (int i = 0; i < tiles; ++i) {
      const int s = i % kStages;
      const u32 phase = (i / kStages) & 1;
      FULL_WAIT
      for (int e = c; e < kBoxX * kBoxY; e += 64) {
        const float v = ld_shared<float>(s * kStageBytes + SWIZZLE(e * 4u));
        const int gx = (i % tiles_x) * kBoxX + e % kBoxX, gy = (i / tiles_x) * kBoxY + e / kBoxX;
        st_global(p.out + gy * (tiles_x * kBoxX) + gx, v);
      }
      mbarrier_arrive(empty0 + 8 * s);
    }
  }
}
)";

struct Edits {
  std::string init_barrier = "__syncthreads();";
  std::string empty_wait = "mbarrier_wait(empty0 + 8 * s, phase ^ 1);";
  std::string full_wait = "mbarrier_wait(full0 + 8 * s, phase);";
  std::string expected_bytes = "kStageBytes";
  std::string swizzle = "swizzle_128";
};

std::string pipeline_source(const Edits& e) {
  std::string body = kPipeline;
  const auto put = [&](const std::string& key, const std::string& value) {
    body.replace(body.find(key), key.size(), value);
  };
  put("INIT_BARRIER", e.init_barrier);
  put("EMPTY_WAIT", e.empty_wait);
  put("FULL_WAIT", e.full_wait);
  put("EXPECTED_BYTES", e.expected_bytes);
  put("SWIZZLE", e.swizzle);
  return std::string("#include \"tessera/arch.cuh\"\nusing namespace tessera;\n") + TESSERA_STRINGIFY(PIPELINE_PARAMS) +
         "\n" + body;
}

// A rows x cols matrix (leading dimension padded to 16 bytes) and the output padded to whole 32x8 boxes.
struct PipelineRun {
  int rows = 37, cols = 100;
  int ld = (cols + 3) / 4 * 4, tiles_x = (cols + 31) / 32, tiles_y = (rows + 7) / 8;
  std::vector<float> in = std::vector<float>(static_cast<std::size_t>(rows * ld));
  std::vector<float> out = std::vector<float>(static_cast<std::size_t>(tiles_x * 32 * tiles_y * 8), -1.0f);

  PipelineRun() {
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i % 1000) + 0.5f;
  }
  void launch(const EmuModule& m, EmuSchedule schedule = EmuSchedule::Forward) {
    TmaTensor tensor;
    tensor.global = in.data();
    tensor.element_bytes = 4;
    tensor.dims = {static_cast<std::uint64_t>(cols), static_cast<std::uint64_t>(rows)};
    tensor.stride_bytes = {static_cast<std::uint64_t>(ld) * 4};
    tensor.box = {32, 8};
    tensor.swizzle_bytes = 128;
    PipelineParams p{};
    const auto descriptor = emulated_tma_descriptor(tensor);
    std::memcpy(&p.map, descriptor.data(), sizeof p.map);
    p.out = out.data();
    p.rows = rows, p.cols = cols;
    EmuLaunch l;
    l.kernel = "pipeline";
    l.block = 96;
    l.shared_bytes = 2 * 1024 + 32;
    const auto bytes = std::as_bytes(std::span(&p, 1));
    l.params.assign(bytes.begin(), bytes.end());
    l.global = {{in.data(), in.size() * 4}, {out.data(), out.size() * 4}};
    EmuOptions options;
    options.schedule = schedule;
    m.launch(l, options);
  }
  // Each box copied out: the matrix where it lies inside, zeros where the box runs past its edge.
  bool matches() const {
    for (int y = 0; y < tiles_y * 8; ++y)
      for (int x = 0; x < tiles_x * 32; ++x) {
        const float want = y < rows && x < cols ? in[static_cast<std::size_t>(y * ld + x)] : 0.0f;
        if (out[static_cast<std::size_t>(y * tiles_x * 32 + x)] != want) return false;
      }
    return true;
  }
};

std::string error_of(const Edits& edits, const std::string& name, EmuSchedule schedule = EmuSchedule::Forward) {
  const auto m = EmuModule::compile(pipeline_source(edits), name);
  PipelineRun run;
  try {
    run.launch(*m, schedule);
  } catch (const EmulationError& e) {
    return e.what();
  }
  return run.matches() ? "" : "wrong data";
}

TEST(EmulatedPipeline, TmaAndMbarriersMoveEveryBox) {
  const auto m = EmuModule::compile(pipeline_source({}), "tma_pipeline");
  for (EmuSchedule schedule : {EmuSchedule::Forward, EmuSchedule::Reverse, EmuSchedule::Shuffle}) {
    PipelineRun run;
    run.launch(*m, schedule);
    EXPECT_TRUE(run.matches()) << "schedule " << static_cast<int>(schedule);
  }
}

TEST(EmulatedPipeline, AMissingFullWaitIsARaceWithTheTmaUnit) {
  Edits e;
  e.full_wait = "";
  const std::string what = error_of(e, "tma_no_full_wait");
  EXPECT_NE(what.find("shared-memory race"), std::string::npos) << what;
  EXPECT_NE(what.find("the TMA copies completing on the mbarrier at offset 2048"), std::string::npos) << what;
}

TEST(EmulatedPipeline, AWrongPhaseParityIsCaught) {
  Edits e;
  e.full_wait = "mbarrier_wait(full0 + 8 * s, phase ^ 1);";
  // The consumers pass the first wait at once (a fresh barrier's parity-1 phase counts as complete) and read a box
  // the copy engine may not have delivered (a race), or, where the producer ran first, wait for a phase that needs
  // their own release (a deadlock).
  for (EmuSchedule schedule : {EmuSchedule::Forward, EmuSchedule::Reverse, EmuSchedule::Shuffle}) {
    const std::string what = error_of(e, "tma_wrong_parity", schedule);
    EXPECT_TRUE(what.find("shared-memory race") != std::string::npos ||
                what.find("wait on the mbarrier at offset 2048") != std::string::npos)
        << what;
  }
}

TEST(EmulatedPipeline, WrongTransactionBytesDeadlockNamingTheBarrier) {
  for (const char* bytes : {"kStageBytes - 16", "kStageBytes + 16"}) {
    Edits e;
    e.expected_bytes = bytes;
    const std::string what = error_of(e, std::string("tma_tx_") + (bytes[12] == '-' ? "short" : "long"));
    EXPECT_NE(what.find("deadlock"), std::string::npos) << bytes << ": " << what;
    EXPECT_NE(what.find("wait on the mbarrier at offset 2048"), std::string::npos) << what;
    EXPECT_NE(what.find(bytes[12] == '-' ? "-16 transaction bytes" : "16 transaction bytes"), std::string::npos)
        << what;
  }
}

TEST(EmulatedPipeline, AStageOverwrittenBeforeItsReadersReleasedItIsCaught) {
  Edits e;
  e.empty_wait = "";
  for (EmuSchedule schedule : {EmuSchedule::Forward, EmuSchedule::Reverse}) {
    const std::string what = error_of(e, "tma_no_empty_wait", schedule);
    EXPECT_TRUE(what.find("shared-memory race") != std::string::npos || what.find("deadlock") != std::string::npos)
        << what;
  }
}

TEST(EmulatedPipeline, UseBeforeTheInitialisationIsVisibleIsReported) {
  Edits e;
  e.init_barrier = "";
  const std::string what = error_of(e, "tma_no_init_barrier", EmuSchedule::Reverse);
  EXPECT_NE(what.find("where no mbarrier was initialised"), std::string::npos) << what;
  const std::string forward = error_of(e, "tma_no_init_barrier");
  EXPECT_NE(forward.find("before its initialisation by thread 0 is visible"), std::string::npos) << forward;
}

TEST(EmulatedPipeline, ReadingTheBoxWithoutItsSwizzleGivesWrongData) {
  Edits e;
  e.swizzle = "";
  EXPECT_EQ(error_of(e, "tma_unswizzled"), "wrong data");
}

TEST(EmulatedPipeline, DescriptorsAreCheckedAsTheDriverChecksThem) {
  std::vector<float> data(64 * 64);
  TmaTensor t;
  t.global = data.data();
  t.dims = {64, 64};
  t.stride_bytes = {256};
  t.box = {32, 8};
  t.swizzle_bytes = 128;
  EXPECT_NO_THROW(emulated_tma_descriptor(t));
  const auto refused = [&](TmaTensor bad, const std::string& field) {
    try {
      emulated_tma_descriptor(bad);
      ADD_FAILURE() << "accepted; expected an error naming " << field;
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(e.argument(), field) << e.what();
    }
  };
  TmaTensor wide = t;
  wide.box = {64, 8};  // 256 bytes of inner box beyond the 128-byte swizzle span
  refused(wide, "box");
  TmaTensor stride = t;
  stride.stride_bytes = {260};
  refused(stride, "stride_bytes");
  TmaTensor unaligned = t;
  unaligned.global = data.data() + 1;
  refused(unaligned, "global");
  TmaTensor big_box = t;
  big_box.box = {32, 300};
  refused(big_box, "box");
  TmaTensor swizzle = t;
  swizzle.swizzle_bytes = 96;
  refused(swizzle, "swizzle_bytes");
}

// The same kernel for the GPU: NVRTC compiles it for sm_90a, and the PTX holds the instructions it stands for.
TEST(EmulatedPipeline, CompilesForHopperWithTheAsyncInstructions) {
  const Nvrtc* nvrtc = nullptr;
  try {
    nvrtc = &Nvrtc::instance();
  } catch (const Unavailable& e) {
    GTEST_SKIP() << e.what();
  }
  const CudaBinary binary = nvrtc->compile(pipeline_source({}), "pipeline", CudaTarget::parse("cuda:sm_90a"), true);
  for (const char* instruction :
       {"mbarrier.init.shared::cta.b64", "mbarrier.arrive.expect_tx.shared::cta.b64", "mbarrier.try_wait.parity",
        "mbarrier.arrive.shared::cta.b64", "cp.async.bulk.tensor.2d.shared::cluster.global.tile",
        "fence.mbarrier_init.release.cluster"})
    EXPECT_NE(binary.ptx.find(instruction), std::string::npos) << instruction;
  ASSERT_TRUE(binary.resources.count("pipeline")) << binary.log;
  EXPECT_EQ(binary.resources.at("pipeline").spill_store_bytes, 0);
}

// --- warpgroup MMAs ---

#define WGMMA_PARAMS    \
  struct WgmmaParams {  \
    TmaDescriptor a, b; \
    float* d;           \
    int m, n, k;        \
  };
WGMMA_PARAMS

// One warpgroup computes a 64xN tile of D = A·Bᵀ (A M x K and B N x K, both row-major 16-bit, K-major for wgmma):
// per 64-wide K block, thread 0 loads the 64x64 and Nx64 tiles with TMA (128-byte swizzle), every thread waits
// for them, and four m64nNk16 MMAs walk the block's K through descriptors whose start moves 32 bytes a step.
const char* kWgmmaGemm = R"(
constexpr int kN = TILE_N;
constexpr unsigned kTileA = 64 * 64 * 2, kTileB = kN * 64 * 2;
extern "C" __global__ void wgmma_gemm(const __grid_constant__ WgmmaParams p) {
  const int t = threadIdx.x;
  const u32 a0 = 0, b0 = kTileA, full = kTileA + kTileB;
  if (t == 0) {
    mbarrier_init(full, 1);
    fence_barrier_init();
  }
  __syncthreads();
  float d[kN / 2];
  for (int i = 0; i < kN / 2; ++i) d[i] = 0;
  const int kblocks = (p.k + 63) / 64;
  for (int kb = 0; kb < kblocks; ++kb) {
    if (t == 0) {
      mbarrier_arrive_expect_tx(full, kTileA + kTileB);
      tma_load_2d(a0, &p.a, kb * 64, 0, full);
      tma_load_2d(b0, &p.b, kb * 64, 0, full);
    }
    mbarrier_wait(full, kb & 1);
    wgmma_fence();
    for (int ks = 0; ks < 4; ++ks)
      MMA(d, wgmma_descriptor(a0 + ks * K_STEP, 16, 1024, SWIZZLE), wgmma_descriptor(b0 + ks * K_STEP, 16, 1024, SWIZZLE),
          1);
    wgmma_commit();
    WAIT
  }
  LATE_WAIT
  const int warp = t / 32, g = t % 32 / 4, q = t % 4;
  for (int j = 0; j < kN / 8; ++j)
    for (int e = 0; e < 4; ++e) {
      const int row = 16 * warp + g + (e >= 2 ? 8 : 0), col = 8 * j + 2 * q + (e & 1);
      if (row < p.m && col < p.n) st_global(p.d + row * p.n + col, d[4 * j + e]);
    }
}
)";

struct WgmmaEdits {
  int tile_n = 64;
  std::string mma = "wgmma<kWgmmaF16, 64>", k_step = "32", swizzle = "kWgmma128B", wait = "wgmma_wait<0>();",
              late_wait = "";
};

std::string wgmma_source(const WgmmaEdits& e) {
  std::string body = kWgmmaGemm;
  const auto put = [&](const std::string& key, const std::string& value) {
    for (std::size_t at = body.find(key); at != std::string::npos; at = body.find(key, at + value.size()))
      body.replace(at, key.size(), value);
  };
  put("MMA(", e.mma + "(");
  put("TILE_N", std::to_string(e.tile_n));
  put("K_STEP", e.k_step);
  put("SWIZZLE", e.swizzle);
  put("LATE_WAIT", e.late_wait);
  put("WAIT", e.wait);
  return std::string("#include \"tessera/arch.cuh\"\nusing namespace tessera;\n") + TESSERA_STRINGIFY(WGMMA_PARAMS) +
         "\n" + body;
}

// Small integers, exact in f16 and bf16 and in f32 sums; the tile's edges past M, N and K come in as TMA's zeros.
struct WgmmaRun {
  int m, n, k;
  bool bf16;
  std::vector<std::uint16_t> a, b;
  std::vector<float> d, want;

  int tile_n;
  WgmmaRun(int m_, int n_, int k_, bool bf16_, int tile_n_) : m(m_), n(n_), k(k_), bf16(bf16_), tile_n(tile_n_) {
    const auto encode = [&](int v) { return bf16 ? to_bf16(static_cast<float>(v)) : to_f16(static_cast<float>(v)); };
    a.resize(static_cast<std::size_t>(m * k)), b.resize(static_cast<std::size_t>(n * k));
    std::vector<int> ai(a.size()), bi(b.size());
    for (std::size_t i = 0; i < a.size(); ++i) ai[i] = static_cast<int>(i * 7 % 5) - 2, a[i] = encode(ai[i]);
    for (std::size_t i = 0; i < b.size(); ++i) bi[i] = static_cast<int>(i * 3 % 7) - 3, b[i] = encode(bi[i]);
    d.assign(static_cast<std::size_t>(m * n), -99.0f);
    want.assign(d.size(), 0.0f);
    for (int r = 0; r < m; ++r)
      for (int c = 0; c < n; ++c) {
        int sum = 0;
        for (int x = 0; x < k; ++x)
          sum += ai[static_cast<std::size_t>(r * k + x)] * bi[static_cast<std::size_t>(c * k + x)];
        want[static_cast<std::size_t>(r * n + c)] = static_cast<float>(sum);
      }
  }
  void launch(const EmuModule& module) {
    const auto map = [&](const std::vector<std::uint16_t>& x, int rows, unsigned box_rows) {
      TmaTensor t;
      t.global = x.data();
      t.element_bytes = 2;
      t.dims = {static_cast<std::uint64_t>(k), static_cast<std::uint64_t>(rows)};
      t.stride_bytes = {static_cast<std::uint64_t>(k) * 2};
      t.box = {64, box_rows};
      t.swizzle_bytes = 128;
      return emulated_tma_descriptor(t);
    };
    WgmmaParams p{};
    const auto da = map(a, m, 64), db = map(b, n, static_cast<unsigned>(tile_n));
    std::memcpy(&p.a, da.data(), sizeof p.a);
    std::memcpy(&p.b, db.data(), sizeof p.b);
    p.d = d.data();
    p.m = m, p.n = n, p.k = k;
    EmuLaunch l;
    l.kernel = "wgmma_gemm";
    l.block = 128;
    l.shared_bytes = static_cast<unsigned>((64 + tile_n) * 64 * 2 + 8);
    const auto bytes = std::as_bytes(std::span(&p, 1));
    l.params.assign(bytes.begin(), bytes.end());
    l.global = {{a.data(), a.size() * 2}, {b.data(), b.size() * 2}, {d.data(), d.size() * 4}};
    module.launch(l);
  }
};

std::string wgmma_outcome(const WgmmaEdits& e, const std::string& name, int m, int n, int k) {
  const auto module = EmuModule::compile(wgmma_source(e), name);
  WgmmaRun run(m, n, k, e.mma.find("Bf16") != std::string::npos, e.tile_n);
  try {
    run.launch(*module);
  } catch (const EmulationError& error) {
    return error.what();
  }
  return run.d == run.want ? "" : "wrong data";
}

TEST(EmulatedWgmma, TmaTilesThroughDescriptorsGiveTheProduct) {
  WgmmaEdits e;
  EXPECT_EQ(wgmma_outcome(e, "wgmma_f16", 64, 64, 256), "");
  EXPECT_EQ(wgmma_outcome(e, "wgmma_f16", 50, 37, 200), "") << "edges: TMA's zeros past M, N and K";
  e.mma = "wgmma<kWgmmaBf16, 64>";
  EXPECT_EQ(wgmma_outcome(e, "wgmma_bf16", 64, 61, 136), "");
  e.tile_n = 128;
  e.mma = "wgmma<kWgmmaF16, 128>";
  EXPECT_EQ(wgmma_outcome(e, "wgmma_n128_f16", 64, 128, 128), "");
  EXPECT_EQ(wgmma_outcome(e, "wgmma_n128_f16", 33, 100, 72), "");
  e.mma = "wgmma<kWgmmaBf16, 128>";
  EXPECT_EQ(wgmma_outcome(e, "wgmma_n128_bf16", 64, 128, 64), "");
}

TEST(EmulatedWgmma, SeededDescriptorBugsGiveWrongProducts) {
  WgmmaEdits swizzle;
  swizzle.swizzle = "kWgmmaInterleave";  // the tile is 128B-swizzled, the descriptor says otherwise
  EXPECT_EQ(wgmma_outcome(swizzle, "wgmma_bad_swizzle", 64, 64, 128), "wrong data");
  WgmmaEdits step;
  step.k_step = "16";  // 8 f16 per k step instead of 16
  EXPECT_EQ(wgmma_outcome(step, "wgmma_bad_step", 64, 64, 128), "wrong data");
}

TEST(EmulatedWgmma, AccumulatorsAreUndefinedUntilTheWait) {
  WgmmaEdits e;
  e.wait = "";  // the stores read d before any wgmma_wait
  EXPECT_EQ(wgmma_outcome(e, "wgmma_no_wait", 64, 64, 64), "wrong data");
}

TEST(EmulatedWgmma, ATileOverwrittenWhileAnMmaReadsItIsReported) {
  WgmmaEdits e;
  e.wait = "";
  e.late_wait = "wgmma_wait<0>();";  // the next K block's TMA lands on tiles the MMAs still read
  const std::string what = wgmma_outcome(e, "wgmma_late_wait", 64, 64, 192);
  EXPECT_NE(what.find("a wgmma in flight still reads"), std::string::npos) << what;
}

TEST(EmulatedWgmma, CompilesForHopper) {
  const Nvrtc* nvrtc = nullptr;
  try {
    nvrtc = &Nvrtc::instance();
  } catch (const Unavailable& e) {
    GTEST_SKIP() << e.what();
  }
  for (const char* mma :
       {"wgmma<kWgmmaF16, 64>", "wgmma<kWgmmaBf16, 64>", "wgmma<kWgmmaF16, 128>", "wgmma<kWgmmaBf16, 128>"}) {
    WgmmaEdits e;
    e.mma = mma;
    e.tile_n = std::string(mma).find(", 128>") != std::string::npos ? 128 : 64;
    const CudaBinary binary = nvrtc->compile(wgmma_source(e), "wgmma_gemm", CudaTarget::parse("cuda:sm_90a"), true);
    const std::string type = std::string(mma).find("Bf16") != std::string::npos ? "bf16.bf16" : "f16.f16";
    for (const std::string& instruction :
         {"wgmma.mma_async.sync.aligned.m64n" + std::to_string(e.tile_n) + "k16.f32." + type,
          std::string("wgmma.fence.sync.aligned"), std::string("wgmma.commit_group.sync.aligned"),
          std::string("wgmma.wait_group.sync.aligned 0")})
      EXPECT_NE(binary.ptx.find(instruction), std::string::npos) << instruction;
    ASSERT_TRUE(binary.resources.count("wgmma_gemm")) << binary.log;
    EXPECT_EQ(binary.resources.at("wgmma_gemm").spill_store_bytes, 0);
  }
}

}  // namespace
}  // namespace tessera
