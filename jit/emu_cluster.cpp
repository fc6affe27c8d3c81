// Thread-block clusters (sm_90) in the SIMT emulator: the cluster barrier, arrivals on a peer block's mbarriers and
// TMA multicast. A cluster's blocks run side by side on one worker and share one happens-before, so a thread that
// reaches into a peer (its copies land there, its arrival completes a peer's phase) is race-checked against the
// peer's own threads, and a peer that has exited is reported instead of written.
#include <fmt/format.h>

#include <vector>

#include "jit/emu_block.hpp"

namespace tessera {
namespace emulator {

namespace {
// Block `rank` of the running thread's cluster, which `what` reaches into.
Block& peer(unsigned rank, const char* what) {
  Block& self = *t_fiber;
  const auto size = static_cast<unsigned>(self.cluster->size());
  if (rank >= size) fail(fmt::format("{} block rank {} of a cluster of {}", what, rank, size));
  Block& b = (*self.cluster)[rank];
  if (&b != &self && b.exited())
    fail(
        fmt::format("{} {} (rank {} of its cluster), whose threads have all exited (its shared memory is gone; the "
                    "kernel must keep a block alive until its peers are done with it)",
                    what, block_name(b), rank));
  return b;
}
}  // namespace

void api_cluster_sync(int line) {
  Thread& t = t_fiber->me();
  t.state = State::ClusterBarrier;
  t.barrier_line = line;
  yield();
}

void api_mbarrier_arrive_cluster(unsigned offset, unsigned rank) {
  const int viewer = t_fiber->agent();
  Block& target = peer(rank, "arrives on an mbarrier of");
  const OnBlock on(target);
  arrive_on(offset, 0, viewer);
}

void api_tma_load_multicast(unsigned dst, const void* map, const int* coords, unsigned mbarrier, unsigned mask) {
  const auto size = static_cast<unsigned>(t_fiber->cluster->size());
  if (mask == 0 || (size < 32 && mask >> size))
    fail(fmt::format("a TMA multicast to the block mask {:#x}: the cluster has {} blocks", mask, size));
  const int viewer = t_fiber->agent();
  for (unsigned r = 0; r < size; ++r) {
    if (!(mask >> r & 1u)) continue;
    Block& target = peer(r, "a TMA multicast writes into");
    const OnBlock on(target);
    load_box(dst, map, coords, mbarrier, viewer);
  }
}

bool resolve_cluster_barrier(std::vector<Block>& cluster) {
  std::vector<int> group;
  bool any = false;
  for (const Block& b : cluster)
    for (const Thread& t : b.threads) any = any || t.state == State::ClusterBarrier;
  if (!any) return false;
  for (Block& b : cluster)
    for (int i = 0; i < static_cast<int>(b.threads.size()); ++i) {
      const Thread& t = b.threads[static_cast<std::size_t>(i)];
      if (t.state == State::Done)
        throw EmulationError(fmt::format(
            "kernel {}: divergent cluster barrier: {} exited while threads of its cluster wait at the barrier "
            "(barrier.cluster waits for every thread of every block)",
            b.launch->kernel, thread_name(b, i)));
      if (t.state != State::ClusterBarrier) return false;
      group.push_back(b.agent(i));
    }
  // Every access of the cluster's threads before the barrier happens before everything after it.
  cluster.front().hb->join(group);
  for (Block& b : cluster)
    for (Thread& t : b.threads) t.state = State::Runnable;
  return true;
}

}  // namespace emulator
}  // namespace tessera
