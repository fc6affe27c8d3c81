// Happens-before between the agents of one emulated block — its threads, and the asynchronous units that write
// shared memory on their behalf (the TMA copies completing on each mbarrier) — by vector clocks, as race detectors
// since FastTrack do: an access is stamped with its agent's clock, and two accesses conflict unless the later agent
// has seen the earlier stamp. Releases publish what an agent has seen (an mbarrier arrive, a copy's completion),
// acquires take it (a completed mbarrier wait); __syncwarp joins its lanes; __syncthreads orders every thread after
// every access before it, kept as one clock per thread (what the barrier published) so that it costs O(threads).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera {

// A set of clocks: what an agent (or a synchronisation object) has seen of every agent.
using VectorClock = std::vector<std::uint32_t>;

class HappensBefore {
 public:
  // `threads` agents that take part in __syncthreads, then `async_units` that do not.
  void reset(int threads, int async_units) {
    threads_ = threads;
    agents_ = threads + async_units;
    seen_.assign(static_cast<std::size_t>(agents_) * static_cast<std::size_t>(agents_), 0);
    at_barrier_.assign(static_cast<std::size_t>(agents_), 0);
    for (int a = 0; a < agents_; ++a) row(a)[a] = 1;
  }
  int agents() const { return agents_; }
  std::uint32_t clock(int agent) const { return row(agent)[agent]; }

  // Whether an access by `earlier` stamped `stamp` happens before anything `later` does now.
  bool ordered(int earlier, std::uint32_t stamp, int later) const {
    return earlier == later || stamp <= at_barrier_[static_cast<std::size_t>(earlier)] || row(later)[earlier] >= stamp;
  }

  // `agent` publishes what it has seen into `into` and moves on to a new clock.
  void release(int agent, VectorClock& into) {
    into.resize(static_cast<std::size_t>(agents_), 0);
    const std::uint32_t* mine = row(agent);
    for (int a = 0; a < agents_; ++a)
      into[static_cast<std::size_t>(a)] = std::max(into[static_cast<std::size_t>(a)], mine[a]);
    ++row(agent)[agent];
  }
  // `agent` takes what `from` holds.
  void acquire(int agent, const VectorClock& from) {
    std::uint32_t* mine = row(agent);
    for (std::size_t a = 0; a < from.size(); ++a) mine[a] = std::max(mine[a], from[a]);
  }
  // The agents in `group` (a warp's lanes at __syncwarp) see all that any of them has seen.
  void join(const std::vector<int>& group) {
    VectorClock all(static_cast<std::size_t>(agents_), 0);
    for (int g : group) release(g, all);
    for (int g : group) acquire(g, all);
  }
  // __syncthreads: every thread's accesses so far happen before everything after.
  void barrier() {
    for (int t = 0; t < threads_; ++t) at_barrier_[static_cast<std::size_t>(t)] = row(t)[t]++;
  }

 private:
  std::uint32_t* row(int agent) { return &seen_[static_cast<std::size_t>(agent) * static_cast<std::size_t>(agents_)]; }
  const std::uint32_t* row(int agent) const {
    return &seen_[static_cast<std::size_t>(agent) * static_cast<std::size_t>(agents_)];
  }

  int threads_ = 0, agents_ = 0;
  std::vector<std::uint32_t> seen_;        // agents × agents: row a is what agent a has seen of each agent
  std::vector<std::uint32_t> at_barrier_;  // each thread's clock at the last __syncthreads
};

}  // namespace tessera
