// Device bodies: mbarriers (sm_90), the transaction barriers of Hopper's asynchronous pipelines (PTX ISA, "Parallel
// Synchronization and Communication Instructions: mbarrier"). An mbarrier is 8 bytes of shared memory at an 8-byte
// aligned offset. A phase completes when its expected arrivals have arrived and the transaction bytes it expects
// (TMA copies) have landed; waits name the phase by its parity. A fresh barrier is in phase 0, so a wait for
// parity 1 returns at once (what a producer's first wait on an empty stage relies on).
#pragma once

#include "tessera/arch/shared.cuh"

namespace tessera {

TESSERA_DEVICE void mbarrier_init(u32 offset, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(offset)), "r"(count) : "memory");
}
// Makes initialisations visible to the asynchronous proxy (TMA) and the cluster; a __syncthreads still orders them
// before the other threads' first use.
TESSERA_DEVICE void fence_barrier_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
TESSERA_DEVICE void mbarrier_arrive(u32 offset) {
  asm volatile(
      "{\n.reg .b64 state;\n"
      "mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(shared_address(offset))
      : "memory");
}
// Expects `bytes` more transaction bytes in the current phase, then arrives: what a producer does before issuing the
// TMA copies that complete on this barrier.
TESSERA_DEVICE void mbarrier_arrive_expect_tx(u32 offset, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(offset)), "r"(bytes)
               : "memory");
}
TESSERA_DEVICE void mbarrier_expect_tx(u32 offset, u32 bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(offset)), "r"(bytes)
               : "memory");
}
// Whether the phase of this parity has completed (acquiring what it published when it has).
TESSERA_DEVICE bool mbarrier_try_wait(u32 offset, u32 parity) {
  u32 done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(shared_address(offset)), "r"(parity)
      : "memory");
  return done != 0;
}
TESSERA_DEVICE void mbarrier_wait(u32 offset, u32 parity) {
  while (!mbarrier_try_wait(offset, parity)) {
  }
}

}  // namespace tessera
