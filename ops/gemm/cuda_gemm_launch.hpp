// From bound GEMM arguments to a CUDA launch: the kernel's parameter block, the grid, and the alignment the
// arguments allow. Shared by the GPU runtime and the emulator, so both launch exactly the same way.
#pragma once

#include <cstdint>

#include "generator/gemm/cuda_gemm_spec.hpp"
#include "jit/simt_emulator.hpp"
#include "ops/gemm/gemm_binding.hpp"
#include "tessera/gemm/gemm_params.cuh"

namespace tessera {

struct CudaLaunch {
  GemmParams params{};
  unsigned grid_x = 0, grid_z = 0;  // rasterised output tiles; batch × split_k
  unsigned block = 0, shared_bytes = 0;
  unsigned reduce_grid = 0, reduce_block = 0;  // the split-K reduction (0: none)
  std::int64_t workspace_bytes = 0;            // params.workspace must point at this many bytes
  // Stream-K: the per-tile flags, at this byte offset into the workspace, zeroed before the launch (-1: none).
  std::int64_t flags_offset = -1, flags_bytes = 0;
  // The wgmma kernel's operands as TMA sees them (A, B, and D with TMA stores), for the back-end to encode into
  // params.a_map, b_map, d_map.
  std::vector<TmaTensor> tma;
};

// The config with its alignment claims (align_a, align_b, align_c) lowered to what the arguments satisfy: the
// data pointer, the leading dimension and the batch stride must all be multiples of the vector width.
CudaGemmConfig fit_alignment(CudaGemmConfig config, const GemmBinding& binding);

// Throws InvalidArgument when the arguments break the spec's alignment claims or exceed the grid's limits.
CudaLaunch plan_cuda_launch(const GemmBinding& binding, const CudaGemmSpec& spec);

// The bytes each operand view spans (A, B, C if read, D, the epilogue tensors): all a correct kernel touches.
std::vector<EmuMemoryRange> operand_extents(const GemmBinding& binding);

}  // namespace tessera
