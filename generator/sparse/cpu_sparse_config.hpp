// How the CPU sparse kernels are blocked.
//
// SpMM walks the block rows of A; for each it keeps an output tile of block_rows × nv vectors of N in registers
// (GEMM's outer-product register tile: A's stored values broadcast, B's rows loaded whole) across the row's entries,
// `chains` independent sets of accumulators so that consecutive entries do not wait on one FMA chain, and prefetches
// the B rows named `prefetch` entries ahead. SDDMM takes a pattern row's entries `cols` at a time as a dot tile (the
// A row against `cols` B rows gathered by column, vectorised along K, `unroll` vectors per step), prefetching the B
// rows of the entries `prefetch` ahead. Where B is larger than the L2, K can be taken `k_panel` elements at a time:
// B's K-slice packed into rows of its own (so that it stays in the L2 while every row of the pattern reads it) and the
// partial sums kept in the output between passes.
#pragma once

#include <string>
#include <vector>

#include "generator/core/cpu_target.hpp"
#include "generator/sparse/sparse_problem.hpp"

namespace tessera {

struct CpuSpmmConfig {
  int nv = 4;        // vectors of N per output tile
  int chains = 2;    // accumulator sets summed at the end of a row
  int prefetch = 8;  // entries ahead whose B rows are prefetched (0: none)

  static CpuSpmmConfig default_for(const SpmmProblem& problem, const CpuTarget& target);
  // "nv=8,chains=2,prefetch=16" applied to this config; throws InvalidArgument for an unknown key.
  CpuSpmmConfig with_overrides(const std::string& text) const;
  friend bool operator==(const CpuSpmmConfig&, const CpuSpmmConfig&) = default;
};

struct CpuSddmmConfig {
  int cols = 4;       // pattern entries per dot tile (at most the vector's lanes, and 8)
  int unroll = 2;     // K vectors per step of the dot tile
  int prefetch = 16;  // entries ahead whose B rows are prefetched (0: none)
  int k_panel = 0;    // K elements a pass over the pattern (a multiple of the vector's lanes); 0: K whole

  static CpuSddmmConfig default_for(const SddmmProblem& problem, const CpuTarget& target);
  CpuSddmmConfig with_overrides(const std::string& text) const;
  friend bool operator==(const CpuSddmmConfig&, const CpuSddmmConfig&) = default;
};

// The most block rows an SpMM tile holds on this target (one vector of N each): 12 on AVX2, 28 on AVX-512. BSR blocks
// taller than this have no valid config.
int cpu_spmm_max_block_rows(const CpuTarget& target);
// The block rows a BSR matrix of `block_rows` runs in on this target: its own where they fit, else the largest power
// of two that does (16 on AVX2: 8), the matrix re-blocked.
int cpu_spmm_block_rows_for(int block_rows, const CpuTarget& target);

// Throw ConfigError stating the rule the config breaks for this signature and target.
void validate(const SpmmSignature& signature, const CpuSpmmConfig& config, const CpuTarget& target);
void validate(const SddmmSignature& signature, const CpuSddmmConfig& config, const CpuTarget& target);

// The configs worth timing: default_for first, then alternatives, all valid.
std::vector<CpuSpmmConfig> cpu_spmm_variants(const SpmmProblem& problem, const CpuTarget& target);
std::vector<CpuSddmmConfig> cpu_sddmm_variants(const SddmmProblem& problem, const CpuTarget& target);

}  // namespace tessera
