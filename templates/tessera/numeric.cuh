// Element types as stored in memory. NVRTC has no cuda_fp16.h built in, and the kernels only move 16-bit values
// and convert them at the edges, so they are plain 16-bit storage; arithmetic happens in f32 or in mma.sync.
#pragma once

#include "tessera/platform.cuh"

namespace tessera {

struct half_t {
  u16 bits;
};
struct bfloat16_t {
  u16 bits;
};

}  // namespace tessera
