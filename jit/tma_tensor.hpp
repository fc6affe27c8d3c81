// What a TMA descriptor describes, before a back-end encodes it (the CUDA driver's cuTensorMapEncodeTiled, or the
// SIMT emulator's own bytes).
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

// A tensor as a TMA descriptor describes it (cuTensorMapEncodeTiled's arguments): rank 1..3, innermost dimension
// first; byte strides of dimensions 1.. (dimension 0 is contiguous); the box one load copies; the shared-memory
// swizzle (0, 32, 64 or 128 bytes).
struct TmaTensor {
  const void* global = nullptr;
  unsigned element_bytes = 4;
  std::vector<std::uint64_t> dims, stride_bytes;
  std::vector<unsigned> box;
  unsigned swizzle_bytes = 0;
};

}  // namespace tessera
