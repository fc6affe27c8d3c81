#include "generator/gemm/cuda_gemm_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "generator/core/arith.hpp"
#include "generator/core/cuda_rates.hpp"

namespace tessera {

namespace {
// Resources a round of co-resident blocks waits on, each as seconds of that resource alone.
struct Demand {
  std::string_view name;
  double seconds;
};

// Overlapped resources: the slowest sets the pace, and the next one still shows in part (a scheduler issuing
// fragment loads is not issuing mma in that slot; a stalled copy delays the barrier).
double overlap(std::array<Demand, 5>& parts, std::string_view& bound) {
  std::sort(parts.begin(), parts.end(), [](const Demand& a, const Demand& b) { return a.seconds > b.seconds; });
  bound = parts[0].name;
  return parts[0].seconds + 0.25 * parts[1].seconds;
}
}  // namespace

CudaMainLoopCounts cuda_main_loop_counts(const GemmSignature& s, const CudaGemmConfig& c) {
  const double elem = dtype_bytes(s.a.dtype);
  // 16-byte global→shared chunks each thread copies per k-tile.
  const double chunks = (c.block_m + c.block_n) * c.block_k * elem / 16.0 / c.threads();
  if (c.math == CudaMath::Simt) {
    // Per k: each lane's tm×tn FFMA, its A and B values as 128-bit shared loads; a register-staged copy per chunk.
    const double tm = c.warp_m / 8.0, tn = c.warp_n / 4.0;
    return {tm * tn * c.block_k, (tm / 4 + tn / 4) * c.block_k + chunks * 12 + 15};
  }
  if (c.math == CudaMath::Wgmma) {
    // Per consumer warp and k-tile: its share of the warpgroup's block_k / 16 wgmma (issued by every warp), and
    // about 20 others (the full-barrier wait, descriptors, fence, commit, wait, the empty arrive, the loop).
    return {c.block_k / 16.0, 20};
  }
  const bool tf32 = s.a.dtype == DType::tf32;
  const double mi = c.warp_m / 16.0, ni = c.warp_n / 8.0, steps = c.block_k / (tf32 ? 8.0 : 16.0);
  // Calibrated on the PTX of the templates (nvcc -ptx of `tessera emit gemm`, every instruction between the loop's
  // label and its branch back): an ldmatrix.x4 and the add of its precomputed offset; ~10 per copied chunk (row
  // predicate, byte count, addresses, the copy); ~30 for the loop, the wait and the barrier. tf32 converts every
  // fragment register and reads an M- or N-contiguous operand with 32-bit loads whose addresses it computes there.
  const double ldmatrix = (mi + ni / 2) * steps;
  double other = ldmatrix * 2 + chunks * 10 + 30;
  if (tf32) {
    other += (mi * 4 + ni * 2) * steps;
    const bool a_mn = s.a.layout.kind() == LayoutKind::ColMajor, b_mn = s.b.layout.kind() == LayoutKind::RowMajor;
    other += ((a_mn ? mi * 4 : 0.0) + (b_mn ? ni * 2 : 0.0)) * steps * 6;
  }
  return {mi * ni * steps, other};
}

CudaGemmEstimate cuda_gemm_estimate(const GemmProblem& p, const CudaGemmConfig& c, const CudaTarget& t) {
  const GemmSignature& s = p.signature;
  const CudaRates r = cuda_rates(t);
  const bool wgmma = c.math == CudaMath::Wgmma, tensor = c.math == CudaMath::TensorOp || wgmma;
  const double m = static_cast<double>(p.m), n = static_cast<double>(p.n), k = static_cast<double>(p.k);
  const double batch = static_cast<double>(p.batch), elem = dtype_bytes(s.a.dtype);
  const double clock = r.clock_hz * r.sustained;
  const double tensor_rate = wgmma ? r.wgmma : r.mma_sync;
  const double math_rate = tensor ? (s.a.dtype == DType::tf32 ? tensor_rate / 2 : tensor_rate) : r.ffma;

  // Blocks resident per SM: shared memory, registers, threads.
  const double smem = static_cast<double>(c.shared_bytes(s));
  const double by_smem = smem > 0 ? std::floor(t.shared_per_sm / (smem + 1024)) : 32;
  const double by_regs = std::floor(t.registers_per_sm / (std::min(c.register_estimate(), 255) * c.threads()));
  const double resident = std::max(1.0, std::min({by_smem, by_regs, 2048.0 / c.threads(), 32.0}));

  double blocks = static_cast<double>(cuda_grid_blocks(p, c));
  double k_tiles = tiles_of(tiles_of(k, c.block_k), c.split_k);
  // Stream-K: SMs × stream_k blocks of an equal share of the iterations, each crossing into about
  // share / k-tiles-per-tile + 1 tiles (a pipeline fill and an epilogue each); a tile shared by several blocks has
  // its pieces written out and added by the block that finishes it. The hybrid's whole tiles add their k-tiles and
  // one fill and epilogue each.
  double pieces_per_block = 1, shared_tiles = 0;
  if (c.stream_k > 0) {
    const StreamKPlan plan = stream_k_plan(p, c, t);
    blocks = static_cast<double>(plan.blocks);
    const double whole = static_cast<double>(plan.tiles - plan.shared_tiles) / static_cast<double>(plan.units);
    k_tiles = plan.iterations + whole * static_cast<double>(plan.k_tiles);
    pieces_per_block = plan.iterations / static_cast<double>(plan.k_tiles) + 1.0 + whole;
    shared_tiles = std::min(static_cast<double>(plan.shared_tiles), static_cast<double>(plan.units)) *
                   static_cast<double>(plan.cluster);
  }
  const double depth = k_tiles * c.block_k;

  // One block's demands, in SM clocks at the whole SM's rate.
  const double math_clocks = 2.0 * c.block_m * c.block_n * depth / math_rate;
  // Every k-tile ends at a barrier the block's warps all wait on: the math pipes drain unless another block's warps
  // are there to issue.
  // (The wgmma kernel's stages hand over through mbarriers: no block-wide barrier per k-tile.)
  const double barrier_clocks = wgmma ? 0.0 : 32.0 * k_tiles;
  const CudaMainLoopCounts counts = cuda_main_loop_counts(s, c);
  const double issue_clocks = c.warps() * k_tiles * (counts.math + counts.other) / r.issue;
  // Shared memory: each warp reads its A rows and B columns per k, the copies write the block's tiles once.
  // wgmma: each consumer warpgroup reads its 64 rows of A and all of B from the shared tiles.
  const double readers = wgmma ? (c.block_m / 64.0) * (64.0 + c.block_n) : c.warps() * (c.warp_m + c.warp_n);
  const double shared_clocks = depth * (tensor ? elem : 4.0) * (readers + c.block_m + c.block_n) / r.shared_bytes;
  const double block_bytes = (c.block_m + c.block_n) * depth * elem;  // into shared memory
  // Read from L2 by the block: a tile its cluster shares is read once for all the blocks that share it (multicast).
  const double l2_block_bytes = (c.block_m / double(c.cluster_n) + c.block_n / double(c.cluster_m)) * depth * elem;
  // Latency: a block keeps stages − 1 k-tiles of copies in flight (the SIMT kernel one, staged in registers), so
  // it receives at most that many bytes per round trip. Operands that fit in L2 come back in about half the time.
  const double unique_bytes = batch * (m * k + k * n) * elem;
  const double round_trip = r.dram_latency_s * (unique_bytes <= r.l2_bytes / 2 ? 0.5 : 1.0);
  const double in_flight = std::max(1.0, c.stages - 1.0) * (c.block_m + c.block_n) * c.block_k * elem;
  const double latency_seconds = block_bytes / in_flight * round_trip;
  const double out_bytes = c.block_m * c.block_n * (c.split_k > 1 ? 4.0 : dtype_bytes(s.d.dtype) * 1.0) +
                           (s.c.layout.reads_memory() ? c.block_m * c.block_n * dtype_bytes(s.c.dtype) : 0.0);

  // Blocks go to SMs as slots free up: the busiest SM runs ceil(blocks / SMs) of them, `resident` at a time. The
  // blocks of a round share the SM's math, issue and shared memory; each waits on its own latency; all active SMs
  // share L2.
  const double sms = static_cast<double>(t.sm_count);
  const double per_sm = tiles_of(blocks, sms);
  const double active = std::min(sms, blocks);
  std::string_view bound = tensor ? "tensor" : "ffma";
  const auto round = [&](double q) {
    std::array<Demand, 5> parts{{{tensor ? "tensor" : "ffma", q * math_clocks / clock},
                                 {"issue", q * issue_clocks / clock},
                                 {"shared", q * shared_clocks / clock},
                                 {"latency", latency_seconds},
                                 {"l2", active * q * l2_block_bytes / r.l2_bytes_per_s}}};
    std::string_view round_bound;
    const double pace = overlap(parts, round_bound) + barrier_clocks / (q * q) / clock;
    if (q == std::min(per_sm, resident)) bound = round_bound;
    // The first k-tiles' copies arrive before any math; D leaves after it (once per tile a stream-K block touches).
    return pace + pieces_per_block * (round_trip + active * q * out_bytes / r.l2_bytes_per_s);
  };
  const double full_rounds = std::floor(per_sm / resident), rest = per_sm - full_rounds * resident;
  double seconds = (full_rounds > 0 ? full_rounds * round(resident) : 0.0) + (rest > 0 ? round(rest) : 0.0);

  // DRAM: each operand once while the pair fits in L2, else re-read per band of tiles the rasterisation cannot keep.
  const double bands = unique_bytes <= r.l2_bytes / 2
                           ? 1.0
                           : std::max(1.0, std::min(tiles_of(m, c.block_m), tiles_of(n, c.block_n)) /
                                               (c.swizzle > 1 ? 8.0 * c.swizzle : 4.0));
  double dram = unique_bytes * bands + batch * m * n * dtype_bytes(s.d.dtype) +
                (s.c.layout.reads_memory() ? batch * m * n * dtype_bytes(s.c.dtype) : 0.0);
  double launch = 4e-6, reduction = 0;
  if (c.split_k > 1) {
    // The partial sums go out with the blocks; the reduction kernel, launched after, reads them back.
    dram += c.split_k * batch * m * n * 4.0;
    reduction = (c.split_k * 4.0 + dtype_bytes(s.d.dtype)) * batch * m * n / r.dram_bytes_per_s;
    launch += 4e-6;
  } else if (c.stream_k > 0) {
    // Every block boundary inside a tile leaves a piece, written out with the block's output (above). The tile's
    // finishing block reads the pieces before it back from L2 in its epilogue, after its own main loop: about
    // k-tiles per tile / iterations per block of them (more blocks share a deep tile), all finishers at once at the
    // end, each at most at its SM's 64 bytes a clock.
    const StreamKPlan plan = stream_k_plan(p, c, t);
    const double tile_bytes = c.block_m * c.block_n * 4.0;
    const double before =
        std::min(static_cast<double>(plan.pieces - 1), static_cast<double>(plan.k_tiles) / plan.iterations);
    const double finishers = std::min(shared_tiles, blocks);
    reduction = std::max(finishers * before * tile_bytes / r.l2_bytes_per_s, before * tile_bytes / (64.0 * r.clock_hz));
  }
  const double dram_seconds = dram / r.dram_bytes_per_s;
  if (dram_seconds > seconds) seconds = dram_seconds, bound = "dram";
  seconds += reduction;
  if (launch > seconds) bound = "launch";
  const double busy = c.stream_k > 0 ? 1.0 : blocks / (tiles_of(per_sm, 1.0) * sms);
  return {seconds + launch, bound, std::min(1.0, busy)};
}

}  // namespace tessera
