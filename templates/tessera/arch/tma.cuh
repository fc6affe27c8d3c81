// Device bodies: TMA loads (sm_90, cp.async.bulk.tensor): one thread asks the copy engine for a box of a tensor,
// which lands in shared memory (swizzled as the descriptor says) and completes its bytes on an mbarrier.
// Coordinates are in elements, innermost first; parts of the box outside the tensor are filled with zeros.
#pragma once

#include "tessera/arch/shared.cuh"
#include "tessera/arch/tma_descriptor.cuh"

namespace tessera {

TESSERA_DEVICE void tma_load_2d(u32 dst, const TmaDescriptor* map, int x, int y, u32 mbarrier) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(shared_address(dst)),
      "l"(map), "r"(x), "r"(y), "r"(shared_address(mbarrier))
      : "memory");
}
TESSERA_DEVICE void tma_load_3d(u32 dst, const TmaDescriptor* map, int x, int y, int z, u32 mbarrier) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(shared_address(dst)),
      "l"(map), "r"(x), "r"(y), "r"(z), "r"(shared_address(mbarrier))
      : "memory");
}
// Orders this thread's generic-proxy shared-memory accesses before later asynchronous-proxy ones (a stage read by
// the threads, then overwritten by TMA).
TESSERA_DEVICE void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

}  // namespace tessera
