// Device bodies: counters in global memory through which the blocks of one grid hand results to each other (the
// pieces of a stream-K tile). A block only waits on blocks numbered before it, which the hardware dispatches first,
// so a wait never holds an SM that the awaited block needs (as CUTLASS's serial split-K semaphore).
#pragma once

#include "tessera/platform.cuh"

namespace tessera {

// This thread's earlier global stores become visible device-wide before its later ones (the stores a flag releases).
TESSERA_DEVICE void threadfence() { __threadfence(); }

// flag += value at device scope, ordered after this thread's earlier memory accesses (release).
TESSERA_DEVICE void flag_release_add(int* flag, int value) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(flag), "r"(value) : "memory");
}

// Spins until flag >= value; this thread's later accesses see what the adds released (acquire).
TESSERA_DEVICE void flag_wait_at_least(const int* flag, int value) {
  for (;;) {
    int seen;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];\n" : "=r"(seen) : "l"(flag) : "memory");
    if (seen >= value) return;
    __nanosleep(64);
  }
}

}  // namespace tessera
