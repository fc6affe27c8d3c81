// The SIMT emulator's own tests: small kernels written against the arch wrappers, correct and deliberately broken.
// Each bug class must be reported (or, for a wrong fragment index, must produce a wrong result).
#include <gtest/gtest.h>

#include <numeric>
#include <span>
#include <vector>

#include "generator/core/dtype.hpp"
#include "jit/simt_emulator.hpp"
#include "tessera/gemm/gemm_params.cuh"

namespace tessera {
namespace {

const char* kPrologue = R"(
#include "tessera/arch.cuh"
#include "tessera/gemm/gemm_params.cuh"
using namespace tessera;
#define OUT static_cast<float*>(const_cast<void*>(p.d.data))
#define IN static_cast<const float*>(p.a.data)
)";

// A launch's parameter block: the bytes of the struct the kernel takes by value.
std::vector<std::byte> bytes_of(const GemmParams& params) {
  const auto bytes = std::as_bytes(std::span(&params, 1));
  return {bytes.begin(), bytes.end()};
}

std::shared_ptr<const EmuModule> module(const std::string& body, const std::string& name) {
  return EmuModule::compile(std::string(kPrologue) + body, name);
}

// Launches `kernel` with A = in (read) and D = out (written), both registered as the launch's global memory.
void launch(const EmuModule& m, const std::string& kernel, unsigned block, unsigned shared,
            const std::vector<float>& in, std::vector<float>& out, const EmuOptions& options = {}) {
  EmuLaunch l;
  l.kernel = kernel;
  l.block = block;
  l.shared_bytes = shared;
  GemmParams p{};
  p.a.data = in.data();
  p.d.data = out.data();
  l.params = bytes_of(p);
  l.global = {{in.data(), in.size() * 4}, {out.data(), out.size() * 4}};
  m.launch(l, options);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const EmulationError& e) {
    return e.what();
  }
  return "";
}

const char* kRotate = R"(
// Each thread publishes its index in shared memory and reads its neighbour's.
extern "C" __global__ void rotate(const GemmParams p) {
  const int t = threadIdx.x;
  st_shared<float>(t * 4, float(t));
  BARRIER
  st_global(OUT + t, ld_shared<float>(((t + 1) % blockDim.x) * 4));
}
)";

std::string with_barrier(bool barrier) {
  std::string body = kRotate;
  body.replace(body.find("BARRIER"), 7, barrier ? "__syncthreads();" : "");
  return body;
}

TEST(Emulator, ABarrierOrdersSharedMemory) {
  const auto m = module(with_barrier(true), "rotate_ok");
  std::vector<float> in(1), out(64);
  launch(*m, "rotate", 64, 256, in, out);
  for (int t = 0; t < 64; ++t) EXPECT_EQ(out[static_cast<std::size_t>(t)], static_cast<float>((t + 1) % 64));
}

TEST(Emulator, AMissingSyncthreadsIsARace) {
  const auto m = module(with_barrier(false), "rotate_racy");
  std::vector<float> in(1), out(64);
  const std::string what = error_of([&] { launch(*m, "rotate", 64, 256, in, out); });
  EXPECT_NE(what.find("shared-memory race"), std::string::npos) << what;
  EXPECT_NE(what.find("kernel rotate"), std::string::npos) << what;
  EXPECT_NE(what.find("block (0, 0, 0)"), std::string::npos) << what;
  // Without race detection the schedule decides what is read: forward and reverse orders disagree.
  EmuOptions quiet;
  quiet.detect_races = false;
  std::vector<float> forward(64), reverse(64);
  launch(*m, "rotate", 64, 256, in, forward, quiet);
  quiet.schedule = EmuSchedule::Reverse;
  launch(*m, "rotate", 64, 256, in, reverse, quiet);
  EXPECT_NE(forward, reverse) << "the order dependence is visible under another schedule";
}

TEST(Emulator, SyncwarpOrdersLanesOfOneWarp) {
  const auto m = module(R"(
extern "C" __global__ void warp_rotate(const GemmParams p) {
  const int t = threadIdx.x;
  st_shared<float>(t * 4, float(t));
  syncwarp();
  st_global(OUT + t, ld_shared<float>(((t + 1) % 32) * 4));
}
)",
                        "warp_rotate");
  std::vector<float> in(1), out(32);
  launch(*m, "warp_rotate", 32, 128, in, out);
  EXPECT_EQ(out[31], 0.0f);
  EXPECT_EQ(out[0], 1.0f);
}

TEST(Emulator, ADivergentBarrierIsReported) {
  const auto m = module(R"(
extern "C" __global__ void divergent(const GemmParams p) {
  if (threadIdx.x < 16) __syncthreads();
  st_global(OUT + threadIdx.x, 1.0f);
}
)",
                        "divergent");
  std::vector<float> in(1), out(64);
  const std::string what = error_of([&] { launch(*m, "divergent", 64, 0, in, out); });
  EXPECT_NE(what.find("divergent __syncthreads"), std::string::npos) << what;
  EXPECT_NE(what.find("threads 0-15 wait"), std::string::npos) << what;
  EXPECT_NE(what.find("threads 16-63 exited"), std::string::npos) << what;
}

TEST(Emulator, SharedMemoryOverflowIsReported) {
  const auto m = module(R"(
extern "C" __global__ void overflow(const GemmParams p) {
  st_shared<float>(threadIdx.x * 4, 1.0f);  // 64 threads × 4 bytes into 128 bytes
}
)",
                        "overflow");
  std::vector<float> in(1), out(1);
  const std::string what = error_of([&] { launch(*m, "overflow", 64, 128, in, out); });
  EXPECT_NE(what.find("shared-memory overflow"), std::string::npos) << what;
  EXPECT_NE(what.find("thread 32 of block (0, 0, 0)"), std::string::npos) << what;
}

TEST(Emulator, OutOfBoundsGlobalAccessIsReported) {
  const auto m = module(R"(
extern "C" __global__ void past_the_end(const GemmParams p) {
  st_global(OUT + threadIdx.x, ld_global(IN + threadIdx.x));  // `in` holds 16 floats, 32 threads read
}
)",
                        "past_the_end");
  std::vector<float> in(16), out(32);
  const std::string what = error_of([&] { launch(*m, "past_the_end", 32, 0, in, out); });
  EXPECT_NE(what.find("out-of-bounds global read of 4 bytes"), std::string::npos) << what;
  EXPECT_NE(what.find("thread 16 of block"), std::string::npos) << what;
}

std::string copy_kernel(bool wait) {
  std::string body = R"(
// Each thread copies 16 bytes with cp.async into shared memory, then thread t reads the chunk of thread t+1.
extern "C" __global__ void async_copy(const GemmParams p) {
  const int t = threadIdx.x;
  cp_async_16(t * 16, IN + 4 * t, 16);
  cp_async_commit();
  WAIT
  __syncthreads();
  st_global(OUT + t, ld_shared<float>((((t + 1) % blockDim.x) * 16)));
}
)";
  body.replace(body.find("WAIT"), 4, wait ? "cp_async_wait<0>();" : "");
  return body;
}

TEST(Emulator, CpAsyncLandsAtItsWait) {
  const auto m = module(copy_kernel(true), "async_copy_ok");
  std::vector<float> in(4 * 32), out(32);
  std::iota(in.begin(), in.end(), 0.0f);
  launch(*m, "async_copy", 32, 512, in, out);
  for (int t = 0; t < 32; ++t) EXPECT_EQ(out[static_cast<std::size_t>(t)], static_cast<float>(4 * ((t + 1) % 32)));
}

TEST(Emulator, AMissingCpAsyncWaitIsReported) {
  const auto m = module(copy_kernel(false), "async_copy_nowait");
  std::vector<float> in(4 * 32), out(32);
  const std::string what = error_of([&] { launch(*m, "async_copy", 32, 512, in, out); });
  EXPECT_NE(what.find("cp.async to them is in flight"), std::string::npos) << what;
}

// One m16n8k16 f16 mma with fragments loaded from global memory in the PTX ISA layout (or a wrong one).
std::string mma_kernel(bool correct) {
  std::string body = R"(
extern "C" __global__ void one_mma(const GemmParams p) {
  const unsigned short* A = static_cast<const unsigned short*>(p.a.data);  // 16×16 row-major f16
  const unsigned short* B = static_cast<const unsigned short*>(p.b.data);  // 16×8 (K×N) row-major f16
  const int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  auto pair = [](const unsigned short* m, int i0, int i1) {
    return unsigned(ld_global(m + i0)) | (unsigned(ld_global(m + i1)) << 16);
  };
  u32 a[4] = {pair(A, g * 16 + 2 * t, g * 16 + 2 * t + 1), pair(A, (g + 8) * 16 + 2 * t, (g + 8) * 16 + 2 * t + 1),
              pair(A, g * 16 + 2 * t + 8, g * 16 + 2 * t + 9), pair(A, (g + 8) * 16 + 2 * t + 8, (g + 8) * 16 + 2 * t + 9)};
  u32 b[2] = {pair(B, (2 * t) * 8 + g, (2 * t + 1) * 8 + g), pair(B, (2 * t + 8) * 8 + g, (2 * t + 9) * 8 + g)};
  SWAP
  float d[4] = {0, 0, 0, 0};
  mma_m16n8k16_f16(d, a, b);
  float* D = OUT;
  st_global(D + g * 8 + 2 * t, d[0]);
  st_global(D + g * 8 + 2 * t + 1, d[1]);
  st_global(D + (g + 8) * 8 + 2 * t, d[2]);
  st_global(D + (g + 8) * 8 + 2 * t + 1, d[3]);
}
)";
  body.replace(body.find("SWAP"), 4, correct ? "" : "{ const u32 x = a[1]; a[1] = a[2]; a[2] = x; }");
  return body;
}

std::vector<float> run_mma(bool correct, const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b) {
  const auto m = module(mma_kernel(correct), correct ? "one_mma" : "one_mma_wrong");
  std::vector<float> d(16 * 8, -1.0f);
  EmuLaunch l;
  l.kernel = "one_mma";
  l.block = 32;
  GemmParams p{};
  p.a.data = a.data();
  p.b.data = b.data();
  p.d.data = d.data();
  l.params = bytes_of(p);
  l.global = {{a.data(), a.size() * 2}, {b.data(), b.size() * 2}, {d.data(), d.size() * 4}};
  m->launch(l);
  return d;
}

TEST(Emulator, MmaFollowsTheFragmentLayoutAndAWrongIndexShows) {
  std::vector<std::uint16_t> a(16 * 16), b(16 * 8);
  std::vector<float> af(a.size()), bf(b.size());
  for (std::size_t i = 0; i < a.size(); ++i) af[i] = static_cast<float>(static_cast<int>(i * 7 % 11) - 5);
  for (std::size_t i = 0; i < b.size(); ++i) bf[i] = static_cast<float>(static_cast<int>(i * 5 % 7) - 3);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = to_f16(af[i]);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = to_f16(bf[i]);
  std::vector<float> expected(16 * 8, 0.0f);
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c)
      for (int k = 0; k < 16; ++k)
        expected[static_cast<std::size_t>(r * 8 + c)] +=
            af[static_cast<std::size_t>(r * 16 + k)] * bf[static_cast<std::size_t>(k * 8 + c)];
  EXPECT_EQ(run_mma(true, a, b), expected);
  EXPECT_NE(run_mma(false, a, b), expected) << "a swapped A fragment register must change the product";
}

TEST(Emulator, ShufflesAndLdmatrixMoveTheRightValues) {
  const auto m = module(R"(
extern "C" __global__ void collectives(const GemmParams p) {
  const int lane = threadIdx.x;
  // A butterfly sum over the warp: every lane ends with 0 + 1 + ... + 31.
  float v = float(lane);
  for (int offset = 16; offset > 0; offset /= 2) v += shfl_xor(0xffffffffu, v, offset);
  st_global(OUT + lane, v);
  // An 8×8 matrix of 16-bit values m[r][c] = 8r + c; row r at shared offset 16r. ldmatrix.x1 gives lane l the pair
  // (row l/4, columns 2(l%4), 2(l%4)+1); .trans gives (rows 2(l%4), 2(l%4)+1, column l/4).
  if (lane < 8)
    for (int c = 0; c < 8; ++c) st_shared<unsigned short>(lane * 16 + c * 2, (unsigned short)(8 * lane + c));
  syncwarp();
  u32 r[1], rt[1];
  ldmatrix_x1(r, (lane % 8) * 16);
  ldmatrix_x1_trans(rt, (lane % 8) * 16);
  st_global(OUT + 32 + lane, float(r[0] & 0xffff) + 1000.0f * float(r[0] >> 16));
  st_global(OUT + 64 + lane, float(rt[0] & 0xffff) + 1000.0f * float(rt[0] >> 16));
}
)",
                        "collectives");
  std::vector<float> in(1), out(96);
  launch(*m, "collectives", 32, 128, in, out);
  for (int l = 0; l < 32; ++l) {
    const auto i = static_cast<std::size_t>(l);
    EXPECT_EQ(out[i], 496.0f);
    const int row = l / 4, col = 2 * (l % 4);
    EXPECT_EQ(out[32 + i], static_cast<float>(8 * row + col) + 1000.0f * static_cast<float>(8 * row + col + 1));
    EXPECT_EQ(out[64 + i], static_cast<float>(8 * col + row) + 1000.0f * static_cast<float>(8 * (col + 1) + row));
  }
}

TEST(Emulator, VotesAndPartialMasks) {
  const auto m = module(R"(
extern "C" __global__ void votes(const GemmParams p) {
  const int lane = threadIdx.x;
  st_global(OUT + lane, float(ballot(0xffffffffu, lane % 3 == 0)));
  st_global(OUT + 32 + lane, float(vote_all(0xffffffffu, lane < 32)) + 2.0f * float(vote_any(0xffffffffu, lane == 7)));
  // Two half-warps shuffle independently, each with its own mask.
  const unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  st_global(OUT + 64 + lane, shfl_idx(half, float(lane), lane < 16 ? 3 : 20));
}
)",
                        "votes");
  std::vector<float> in(1), out(96);
  launch(*m, "votes", 32, 0, in, out);
  unsigned expected_ballot = 0;
  for (int l = 0; l < 32; l += 3) expected_ballot |= 1u << l;
  for (int l = 0; l < 32; ++l) {
    const auto i = static_cast<std::size_t>(l);
    EXPECT_EQ(out[i], static_cast<float>(expected_ballot));
    EXPECT_EQ(out[32 + i], 3.0f);
    EXPECT_EQ(out[64 + i], l < 16 ? 3.0f : 20.0f);
  }
}

TEST(Emulator, ACollectiveMissingLanesIsReported) {
  const auto m = module(R"(
extern "C" __global__ void lonely(const GemmParams p) {
  if (threadIdx.x >= 8) return;
  st_global(OUT + threadIdx.x, shfl_xor(0xffffffffu, 1.0f, 1));
}
)",
                        "lonely");
  std::vector<float> in(1), out(32);
  const std::string what = error_of([&] { launch(*m, "lonely", 32, 0, in, out); });
  EXPECT_NE(what.find("waits for threads 8-31, which exited"), std::string::npos) << what;
}

TEST(Emulator, BadSourcesAndLaunchesAreRejected) {
  EXPECT_THROW(module("this is not C++", "broken_source"), CompileError);
  const auto m = module(with_barrier(true), "rotate_ok");
  std::vector<float> in(1), out(64);
  EXPECT_THROW(launch(*m, "no_such_kernel", 64, 256, in, out), InvalidArgument);
  EXPECT_THROW(launch(*m, "rotate", 48, 256, in, out), InvalidArgument);
}

// The profile counts what a profiler's source counters would: one warp reads a 16×64 f16 tile with ldmatrix.x4 from
// shared memory laid out row after row (128-byte rows: the 8 rows of each matrix hit the same 4 banks, 8 wavefronts
// where 1 would do) and XOR-swizzled (no conflicts); it loads 32 floats coalesced (4 sectors) and strided by 32
// floats (32 sectors for 128 bytes).
const char* kProfiled = R"(
#include "tessera/warp/smem_swizzle.cuh"
extern "C" __global__ void profiled(const GemmParams p) {
  const int lane = threadIdx.x;
  using Swizzled = SwizzledTile<128>;
  for (int i = lane; i < 16 * 64 / 2; i += 32) {  // 16 rows of 64 halves, 4 bytes at a time
    const int row = i / 32, byte = (i % 32) * 4;
    st_shared<u32>(row * 128 + byte, u32(i));
    st_shared<u32>(2048 + Swizzled::offset(row, byte), u32(i));
  }
  __syncthreads();
  u32 plain[4], swizzled[4];
  ldmatrix_x4(plain, (lane & 15) * 128 + (lane >> 4) * 16);
  ldmatrix_x4(swizzled, 2048 + Swizzled::offset(lane & 15, (lane >> 4) * 16));
  float sum = ld_global(IN + lane) + ld_global(IN + lane * 32);
  for (int i = 0; i < 4; ++i) sum += float(plain[i] == swizzled[i]);
  st_global(OUT + lane, sum);
}
)";

TEST(Emulator, TheProfileCountsBankConflictsAndSectors) {
  const auto m = module(kProfiled, "profiled");
  std::vector<float> in(32 * 32, 1.0f), out(32);
  EmuProfile profile;
  EmuOptions options;
  options.profile = &profile;
  launch(*m, "profiled", 32, 4096, in, out, options);
  for (float x : out) EXPECT_EQ(x, 6.0f) << "both layouts hold the same matrix";
  EXPECT_EQ(profile.launches, 1u);
  // Two ldmatrix.x4 of 4 phases each: the swizzled one 4 wavefronts, the plain one 8 per matrix.
  EXPECT_EQ(profile.ldmatrix.requests, 2u);
  EXPECT_EQ(profile.ldmatrix.ideal, 8u);
  EXPECT_EQ(profile.ldmatrix.transactions, 4u + 4u * 8u);
  // 32 lanes of 4-byte stores per request: row-after-row stores of consecutive words have no conflicts, and the
  // swizzle only permutes 16-byte chunks within a line.
  EXPECT_EQ(profile.shared_store.requests, 2u * 16u);
  EXPECT_EQ(profile.shared_store.transactions, profile.shared_store.ideal);
  // Global: 4 sectors for the coalesced load (5 where the vector's data is not 32-byte aligned), 32 for the strided
  // one; each needs 4 at best.
  const auto straddle = [](const std::vector<float>& v) {
    return reinterpret_cast<std::uintptr_t>(v.data()) % 32 ? 1u : 0u;
  };
  EXPECT_EQ(profile.global_load.requests, 2u);
  EXPECT_EQ(profile.global_load.transactions, 4u + straddle(in) + 32u);
  EXPECT_EQ(profile.global_load.ideal, 8u);
  EXPECT_EQ(profile.global_store.transactions, 4u + straddle(out));
}

}  // namespace
}  // namespace tessera
