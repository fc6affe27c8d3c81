// Device bodies: TMA loads and stores (sm_90, cp.async.bulk.tensor): one thread asks the copy engine for a box of a
// tensor, which lands in shared memory (swizzled as the descriptor says) and completes its bytes on an mbarrier, or
// for a box of shared memory to be written to the tensor. Coordinates are in elements, innermost first; parts of a
// loaded box outside the tensor are filled with zeros.
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
// A TMA store: the box at shared offset `src` (laid out and swizzled as the descriptor says) to the tensor at the
// coordinates; the parts of the box outside the tensor are not written. One thread issues it, after the threads that
// wrote the box have fenced (fence_proxy_async) and synchronised with it.
TESSERA_DEVICE void tma_store_3d(const TmaDescriptor* map, u32 src, int x, int y, int z) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(map),
               "r"(shared_address(src)), "r"(x), "r"(y), "r"(z)
               : "memory");
}
TESSERA_DEVICE void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until this thread's committed TMA stores are done (their shared source free, their writes made).
TESSERA_DEVICE void tma_store_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Orders this thread's generic-proxy shared-memory accesses before later asynchronous-proxy ones (a stage read by
// the threads, then overwritten by TMA).
TESSERA_DEVICE void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

}  // namespace tessera
