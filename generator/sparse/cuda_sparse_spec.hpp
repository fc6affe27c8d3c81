// CUDA sparse kernels: {signature, CUDA config, CUDA target}; their KernelSpecs are ops "spmm" and "sddmm" on a CUDA
// target. BSR SpMM with 16×16 f16/bf16 blocks runs on mma.sync (a warp per block row, each block one A operand).
// CSR follows Sputnik's design (templates/tessera/sparse): a warp per row of the pattern, rows visited longest first,
// each row's indices and values staged in shared memory; SpMM gives each lane `vec` columns of N (vector loads of
// B's rows, a predicated residue), SDDMM each lane one entry of the row (its dot product over K against the A row
// staged in shared memory, B's row read `vec` elements at a time).
#pragma once

#include <string>

#include "generator/core/cuda_target.hpp"
#include "generator/core/hash.hpp"
#include "generator/sparse/sparse_problem.hpp"

namespace tessera {

struct KernelSpec;  // generator/core/kernel_spec.hpp

struct CudaSparseConfig {
  int warps = 4;  // rows (BSR: block rows) per block, one warp each
  int vec = 4;    // CSR: elements per vector load of B (1, 2 or 4); at most what B's rows are aligned to
  int tiles = 4;  // BSR on tensor cores: mma n8 tiles of N per warp (1, 2, 4 or 8)

  int threads() const { return 32 * warps; }
  friend bool operator==(const CudaSparseConfig&, const CudaSparseConfig&) = default;
};

// Shared memory the kernels stage per block: a warp's 32 indices and values (SpMM), plus its slice of the A row
// (SDDMM, kSddmmKChunk f32 values).
inline constexpr int kSddmmKChunk = 256;
int spmm_shared_bytes(const CudaSparseConfig& config);
int sddmm_shared_bytes(const CudaSparseConfig& config);

// vec 4 for wide N (or K), 2 or 1 for narrow; 4 warps.
CudaSparseConfig cuda_spmm_default(const SpmmProblem& problem);
CudaSparseConfig cuda_sddmm_default(const SddmmProblem& problem);

// Throw ConfigError stating the rule broken: CSR (SpMM also BSR 16×16 with f16 or bf16 values and B of the same
// type); values, B (and A) f32, f16 or bf16 with B (A) row-major; D f32 row-major (SpMM); warps 1, 2, 4 or 8; vec
// 1, 2 or 4; tiles 1, 2, 4 or 8; at most 8 epilogue tensors.
void validate(const SpmmSignature& signature, const CudaSparseConfig& config, const CudaTarget& target);
void validate(const SddmmSignature& signature, const CudaSparseConfig& config, const CudaTarget& target);

struct CudaSpmmSpec {
  SpmmSignature signature;
  CudaSparseConfig config;
  CudaTarget target;

  KernelSpec generic() const;
  Hash128 hash() const;
  // e.g. spmm_csr_i32_f16_w4v4_sm80_1a2b3c4d.
  std::string name() const;
};

struct CudaSddmmSpec {
  SddmmSignature signature;
  CudaSparseConfig config;
  CudaTarget target;

  KernelSpec generic() const;
  Hash128 hash() const;
  std::string name() const;
};

}  // namespace tessera
