// Config: how to compute a GEMM on the CPU (register tile, cache blocks, unrolling), and its validation.
#pragma once

#include <cstdint>

#include "generator/core/cpu_target.hpp"
#include "generator/gemm/gemm_problem.hpp"

namespace tessera {

// BLIS structure: a macro-tile of MC×NC outputs is computed in KC-deep slabs from packed panels of A (MC×KC)
// and B (KC×NC) by an MR×NR register micro-kernel; the macro-tiles are the parallel grid.
struct CpuGemmConfig {
  int mr = 8;
  int nr = 32;
  int kc = 256;
  int mc = 128;
  int nc = 512;
  int k_unroll = 4;
  // Packing copies operand blocks into contiguous, zero-padded panels. Without it the micro-kernel reads A in place
  // (broadcasts along its rows) and B in place (masked vector loads along its rows), which saves the copy on small
  // and skinny problems and costs locality on large ones.
  bool pack_a = true;
  bool pack_b = true;
  // Sizes compiled in as constants (0: runtime sizes). A fixed kernel is straight-line code over its micro-tiles,
  // with edge masks and K resolved at generation time, LIBXSMM-style; it runs only that M×N×K (any batch).
  int fixed_m = 0, fixed_n = 0, fixed_k = 0;
  bool fixed() const { return fixed_m > 0; }
  // A fixed kernel's rows come in two halves (whole MR tiles first) when it has two MR tiles of them, so that two
  // threads can share one matrix; its tile index counts halves: batch item t / 2, half t % 2.
  int fixed_row_parts() const { return fixed() && fixed_m >= 2 * mr ? 2 : 1; }
  int fixed_part_rows() const { return ((fixed_m + fixed_row_parts() - 1) / fixed_row_parts() + mr - 1) / mr * mr; }
  // Loads a K step of the register tile issues per FMA: MR broadcasts of A and NR / lanes vectors of B over
  // MR × NR / lanes FMAs (8x32 on AVX-512: 10 per 16; 6x64 and 8x48: 10-11 per 24).
  double loads_per_fma(int lanes) const {
    const double vectors = static_cast<double>(nr) / lanes;
    return (mr + vectors) / (mr * vectors);
  }
  // A dot-product kernel for A·Bᵀ with few rows (x·Wᵀ, as nn.Linear stores W): row-major A and column-major B
  // both contiguous along K, vectorised along K; MR rows × NR columns (NR ≤ the vector width) of accumulator
  // vectors, summed across lanes once per tile. Nothing is packed; the partial sums of K slabs stay vectors.
  bool dot = false;
  // The kernel computes Dᵀ = Bᵀ·Aᵀ (transposed(problem)), and every other field describes that product (fixed sizes
  // too: fixed_m is N): B becomes
  // the operand streamed in place and A the one packed. For x·Wᵀ the large W is then read once, in place, instead of
  // being transposed into panels; a column-major A and B become row-major ones.
  bool transpose = false;
  // bf16 and int8 products on AMX tiles (AmxTiles) instead of vector register tiles: MR and NR in 16-row tiles,
  // A in place, B packed with its depth padded to 64-byte tile blocks. kAmxEmulated is the same kernel with the tile
  // instructions' effect in vector code: it runs anywhere (slowly) and checks the AMX kernels' tiling and edges.
  static constexpr int kAmxNone = 0, kAmxTiles = 1, kAmxEmulated = 2;
  int amx = kAmxNone;

  // The default for a problem on a target, derived from the ISA and the cache sizes.
  static CpuGemmConfig default_for(const GemmProblem& problem, const CpuTarget& target);
  // `chosen` (the config of `problem` on `target` a runtime picked) with the overrides of `text` applied, from the
  // vector kernels' default_for where the text turns an AMX config's tiles off ("amx=0": its 32×32 tile is no
  // register tile).
  static CpuGemmConfig overridden(const CpuGemmConfig& chosen, const GemmProblem& problem, const CpuTarget& target,
                                  const std::string& text);
  // Applies "mr=8,nr=32,kc=256,mc=128,nc=512,k_unroll=4,pack_a=0,pack_b=1,transpose=1,amx=1" (any subset) to this
  // config.
  CpuGemmConfig with_overrides(const std::string& text) const;
  // Bytes of per-thread scratch: packed A and B panels and the partial-sum tile for K > KC.
  std::int64_t workspace_bytes() const;
  // Columns of the partial-sum tile: NC, and one micro-tile more when B is read in place, whose first micro-tile
  // may be a narrow one that ends on a vector boundary of B.
  // The workspace's A region, in floats: a packed MC×KC block, or an AMX kernel's MR×KC sliver of tiles (bytes of
  // bf16 or int8: at most MR·KC·4).
  std::int64_t packed_a_floats() const {
    return pack_a ? std::int64_t{mc} * kc : amx != kAmxNone ? std::int64_t{mr} * kc : 0;
  }
  std::int64_t partial_sum_columns() const { return pack_b || dot ? nc : std::int64_t{nc} + nr; }
  // This config without `transpose`, for the product it describes.
  CpuGemmConfig untransposed() const {
    CpuGemmConfig c = *this;
    c.transpose = false;
    return c;
  }
  friend bool operator==(const CpuGemmConfig&, const CpuGemmConfig&) = default;
};

// Whether computing Dᵀ = Bᵀ·Aᵀ (CpuGemmConfig::transpose) beats D = A·B by default: B column-major and A the
// smaller operand.
bool transpose_pays(const GemmProblem& problem);

// Whether default_for gives a problem AMX tiles: the target has AMX, the inputs are bf16 or int8, M has a tile's rows.
bool amx_pays(const GemmProblem& problem, const CpuTarget& target);
// An AMX config (CpuGemmConfig::amx = kAmxTiles) of an MR×NR tile over KC-deep slabs, MC and NC from the caches.
CpuGemmConfig amx_config(const GemmProblem& problem, const CpuTarget& target, int mr, int nr, int kc);

// K steps one multiply instruction consumes per 32-bit lane, which the packed B panel interleaves: 1 for f32, 2 for
// bf16 (vdpbf16ps), 4 for u8×i8 (vpdpbusd).
int k_group(const GemmSignature& signature);

// Whether a problem is one for a dot kernel: A·Bᵀ, row-major A of at most 64 rows, column-major B, f32.
bool dot_kernel_fits(const GemmProblem& problem);

// Accepts the triple or throws one ConfigError naming the violated rule.
void validate(const GemmSignature& signature, const CpuGemmConfig& config, const CpuTarget& target);

}  // namespace tessera
