// CudaGemmConfig: how to compute a GEMM on an NVIDIA GPU (block and warp tiles, pipeline, split-K, rasterisation,
// vector widths), and its validation against a problem signature and an architecture.
#pragma once

#include <cstdint>
#include <string>

#include "generator/core/cuda_target.hpp"
#include "generator/gemm/gemm_problem.hpp"

namespace tessera {

enum class CudaMath : unsigned char {
  Simt,      // f32 FFMA, register-tiled, double-buffered shared memory
  TensorOp,  // mma.sync: m16n8k16 for f16/bf16, m16n8k8 for tf32; cp.async ring, ldmatrix, swizzled shared memory
  // sm_90a, f16/bf16: warp-specialised, TMA into an mbarrier-guarded ring, wgmma.mma_async
  // from shared memory; a consumer warpgroup per 64 rows (warp_m = 64, warp_n = block_n), plus one producer.
  Wgmma,
};
std::string_view cuda_math_name(CudaMath math);

// A block computes a block_m×block_n tile of D in block_k-deep steps; its warps each own a warp_m×warp_n sub-tile.
struct CudaGemmConfig {
  CudaMath math = CudaMath::TensorOp;
  int block_m = 128, block_n = 128, block_k = 32;
  int warp_m = 64, warp_n = 64;
  int stages = 3;   // shared-memory pipeline depth (SIMT: 2, double buffering)
  int split_k = 1;  // >1: K is split over that many blocks, partial sums reduced by a second kernel
  // >0: stream-K with this many resident blocks per SM: a grid of SMs × stream_k blocks shares the (tile, k-tile)
  // iterations evenly, each walking a contiguous run of them across tile boundaries; a tile finished by one block is
  // stored as usual; of a tile shared by several, the blocks before the last store their pieces to the workspace and
  // the last adds them before its epilogue.
  int stream_k = 0;
  // Stream-K's hybrid with data-parallel tiles (CUTLASS's "DP + SK"): 0, every tile shares the iterations; 1 or 2,
  // only the tiles of the grid's last partial wave (and the full wave before it) do, the waves before run one tile
  // per block, with no pieces or flags. Each block does its share of the stream-K tiles first, then its whole tiles.
  int stream_k_waves = 0;
  // wgmma kernel, row-major D with 16-byte rows: each warp's finished rows leave through shared memory by TMA stores
  // (boxes of 16 rows x 128 bytes, 128-byte swizzled) instead of the threads' vector stores.
  bool tma_store = false;
  // wgmma kernel: thread-block clusters of cluster_m x cluster_n tiles (1 or 2 each). The blocks of a cluster
  // column share one B tile, those of a row one A tile: each loads its part once and multicasts it by TMA, cutting
  // the L2 reads of the shared operand by the cluster's extent.
  int cluster_m = 1, cluster_n = 1;
  int swizzle = 8;  // blocks are rasterised in groups of this many tile rows, for L2 reuse of B
  // Elements per vector access that the arguments guarantee (pointer and leading dimension alignment): A and B
  // global→shared copies, C reads and D stores. Smaller values mean narrower copies, not a different kernel shape.
  int align_a = 8, align_b = 8, align_c = 4;

  // The block's warps (wgmma: four per consumer warpgroup and four producers).
  int warps() const {
    return math == CudaMath::Wgmma ? 4 * (1 + block_m / 64) : (block_m / warp_m) * (block_n / warp_n);
  }
  int threads() const { return 32 * warps(); }
  // Dynamic shared memory per block: the pipeline's stages, or the epilogue staging if larger (they share it).
  std::int64_t shared_bytes(const GemmSignature& signature) const;
  // Bytes of global scratch for the split-K or stream-K partial sums of a problem on a target (0 without either).
  std::int64_t workspace_bytes(const GemmProblem& problem, const CudaTarget& target) const;
  // A register count estimate (accumulators, fragments, addressing) used to reject tiles before NVRTC does.
  int register_estimate() const;

  // The default for a problem on a target: the math from the dtypes, tiles from the problem size.
  static CudaGemmConfig default_for(const GemmProblem& problem, const CudaTarget& target);
  // "block_m=128,block_n=256,block_k=32,warp_m=64,warp_n=64,stages=4,split_k=1,swizzle=8,align_a=8,align_b=8,
  // align_c=4,simt=0" (any subset).
  CudaGemmConfig with_overrides(const std::string& text) const;
  friend bool operator==(const CudaGemmConfig&, const CudaGemmConfig&) = default;
};

// How a stream-K grid shares a problem's iterations: `units` units, each with `iterations` (tile, k-tile) steps of
// `total` (give or take one) over the first `shared_tiles` of the `tiles`, tiles of `k_tiles` steps each; a tile is
// shared by at most `pieces` units. The other tiles (stream_k_waves > 0) go whole to the units in turn. A unit is
// a block and a tile, or with clusters a cluster of `cluster` blocks and a cluster tile (its blocks' tiles, each
// block over the same k-tiles of its own): `blocks` = units × cluster, and a flag per block's tile.
struct StreamKPlan {
  std::int64_t units = 0, blocks = 0, cluster = 1, total = 0, k_tiles = 0, tiles = 0, shared_tiles = 0, pieces = 0;
  double iterations = 0;
};
StreamKPlan stream_k_plan(const GemmProblem& problem, const CudaGemmConfig& config, const CudaTarget& target);
// Where a stream-K workspace's per-tile flags start (after the pieces' partial sums), in bytes.
std::int64_t stream_k_flags_offset(const GemmProblem& problem, const CudaGemmConfig& config, const CudaTarget& target);

// The share of the SMs a grid of equal blocks leaves idle in its last wave (0 when the waves are full; stream-K:
// none).
double last_wave_idle(const GemmProblem& problem, const CudaGemmConfig& config, const CudaTarget& target);
// The blocks of a data-parallel grid: the tiles, padded to whole clusters, times batch and split.
std::int64_t cuda_grid_blocks(const GemmProblem& problem, const CudaGemmConfig& config);
// Blocks of a config resident on one SM (shared memory, registers, threads).
int resident_blocks(const GemmSignature& signature, const CudaGemmConfig& config, const CudaTarget& target);

// The math mode a signature needs: TensorOp for f16, bf16, tf32 inputs; Simt for f32.
CudaMath cuda_math_for(const GemmSignature& signature);
// Whether the Hopper kernel can take the signature on the target: sm_90a, f16 or bf16 with A and B row- or
// column-major, or tf32 with both K-major.
bool wgmma_supports(const GemmSignature& signature, const CudaTarget& target);
// K depth of one mma.sync instruction for the signature's input type (16 for f16/bf16, 8 for tf32).
int mma_k(const GemmSignature& signature);

// Accepts the triple or throws one ConfigError naming the violated rule, before any CUDA source is generated.
void validate(const GemmSignature& signature, const CudaGemmConfig& config, const CudaTarget& target);

}  // namespace tessera
