// Device bodies: named barriers (bar.sync / bar.arrive with an id): a subset of a block's warps synchronise without
// the rest, or hand a turn to one another (bar.arrive does not wait). Barrier 0 is __syncthreads'; `threads` is a
// multiple of 32 and every warp taking part executes the instruction whole.
#pragma once

#include "tessera/platform.cuh"

namespace tessera {

TESSERA_DEVICE void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
TESSERA_DEVICE void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace tessera
