// The SIMT emulator: runs tessera's CUDA kernels on the CPU with a faithful model of the execution model, to check
// their numerics and find their bugs without a GPU. Each CUDA thread is a fiber (Boost.Context fcontext); a block's
// fibers run on one worker thread until they block in __syncthreads, __syncwarp or a warp collective (ldmatrix,
// mma.sync, shuffles, warpgroup MMAs) or an mbarrier wait, which the emulator carries out once every participant has
// arrived. Shared memory is a per-block arena; every shared and global access is bounds-checked, shared accesses are
// checked for races by happens-before (vector clocks over the threads and the TMA units: __syncthreads, __syncwarp
// and mbarrier phases order them), cp.async copies land only when a cp.async.wait_group retires them, TMA boxes
// complete on their mbarrier, and wgmma results land at wgmma_wait while the tiles they read stay pinned.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "generator/core/error.hpp"

#include "generator/core/emulation_options.hpp"
#include "jit/tma_tensor.hpp"

namespace tessera {

// A bug the emulator found in a kernel: the message names the kernel, the block, the threads and the address.
class EmulationError : public Error {
 public:
  using Error::Error;
};

struct EmuMemoryRange {
  const void* begin = nullptr;
  std::size_t bytes = 0;
};

struct EmuLaunch {
  std::string kernel;
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block = 32;  // threads per block (x), a multiple of 32
  unsigned shared_bytes = 0;
  // The kernel's parameter block, opaque here: the bytes of the struct its one parameter takes by value.
  std::vector<std::byte> params;
  std::vector<EmuMemoryRange> global;  // every global byte the kernel may touch; anything else is out of bounds
};

// The 128 bytes of a TMA descriptor (tessera::TmaDescriptor) for an emulated kernel. Checks what the driver checks
// (alignment of the address and strides, box extents, the inner box within the swizzle span) and throws
// InvalidArgument naming the field.
std::array<std::byte, 128> emulated_tma_descriptor(const TmaTensor& tensor);

class EmuModule {
 public:
  // Compiles CUDA source (which may include any embedded template) for the host and loads it; cached on disk.
  static std::shared_ptr<const EmuModule> compile(const std::string& source, const std::string& name);
  // Runs a grid to completion. Throws EmulationError for the first bug found (and InvalidArgument for a bad launch).
  void launch(const EmuLaunch& launch, const EmuOptions& options = {}) const;
  double compile_ms() const { return compile_ms_; }
  const std::string& library_path() const { return path_; }

 private:
  EmuModule() = default;
  void* handle_ = nullptr;
  std::string path_;
  double compile_ms_ = 0;
};

}  // namespace tessera
