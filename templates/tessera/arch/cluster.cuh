// Device bodies: thread-block clusters (sm_90). A kernel declared with __cluster_dims__ runs its blocks in clusters
// that are resident together and can reach one another's shared memory: a cluster-wide barrier, arrivals on a peer
// block's mbarrier (mapa translates an offset into the peer's window), and TMA loads multicast to several blocks,
// each block's copy landing at the same offset and completing on its own mbarrier at the same offset (PTX ISA,
// "cp.async.bulk.tensor", ".multicast::cluster").
#pragma once

#include "tessera/arch/shared.cuh"
#include "tessera/arch/tma_descriptor.cuh"

namespace tessera {

// This block's rank in its cluster (%cluster_ctarank: consecutive blocks along x for clusters along x).
TESSERA_DEVICE u32 cluster_rank() {
  u32 rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
// Every thread of every block of the cluster arrives, then waits for all (release / acquire at cluster scope): what
// one block did before (its mbarriers initialised, its reads of a peer's tiles) is visible to all after.
TESSERA_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// Arrives on the mbarrier at `offset` of the cluster's block `rank` (this block's own at its own rank).
TESSERA_DEVICE void mbarrier_arrive_cluster(u32 offset, u32 rank) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}\n" ::"r"(shared_address(offset)),
      "r"(rank)
      : "memory");
}
// A TMA load of one box to shared offset `dst` of every block whose bit is set in `mask`, each completing the box's
// bytes on its own mbarrier at offset `mbarrier`.
TESSERA_DEVICE void tma_load_3d_multicast(u32 dst, const TmaDescriptor* map, int x, int y, int z, u32 mbarrier,
                                          u16 mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, "
      "{%2, %3, %4}], [%5], %6;\n" ::"r"(shared_address(dst)),
      "l"(map), "r"(x), "r"(y), "r"(z), "r"(shared_address(mbarrier)), "h"(mask)
      : "memory");
}

}  // namespace tessera
