// Happens-before between the agents of one emulated thread-block cluster (one block, without clusters) — each
// block's threads, and the asynchronous units that write its shared memory (the TMA copies completing on each of its
// mbarriers) — by vector clocks, as race detectors
// since FastTrack do: an access is stamped with its agent's clock, and two accesses conflict unless the later agent
// has seen the earlier stamp. Releases publish what an agent has seen (an mbarrier arrive, a copy's completion),
// acquires take it (a completed mbarrier wait); __syncwarp and the cluster barrier join their threads; __syncthreads
// orders a block's threads after every access of theirs before it, kept as one clock per thread (what the barrier
// published) so that it costs O(threads).
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
  // `blocks` blocks of `span` agents each: a block's threads, then its units.
  void reset(int blocks, int span) {
    span_ = span;
    agents_ = blocks * span;
    seen_.assign(static_cast<std::size_t>(agents_) * static_cast<std::size_t>(agents_), 0);
    at_barrier_.assign(static_cast<std::size_t>(agents_), 0);
    for (int a = 0; a < agents_; ++a) row(a)[a] = 1;
  }
  int agents() const { return agents_; }
  std::uint32_t clock(int agent) const { return row(agent)[agent]; }

  // Whether an access by `earlier` stamped `stamp` happens before anything `later` does now. A __syncthreads orders
  // only its own block's agents; another block learns of an access through a release that covers its stamp (so an
  // order that reaches another block only through a __syncthreads is not seen: the check errs towards a race).
  bool ordered(int earlier, std::uint32_t stamp, int later) const {
    return earlier == later ||
           (earlier / span_ == later / span_ && stamp <= at_barrier_[static_cast<std::size_t>(earlier)]) ||
           row(later)[earlier] >= stamp;
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
  // __syncthreads of the block whose threads are agents [first, first + threads): their accesses so far happen
  // before everything after.
  void barrier(int first, int threads) {
    for (int t = first; t < first + threads; ++t) at_barrier_[static_cast<std::size_t>(t)] = row(t)[t]++;
  }

 private:
  std::uint32_t* row(int agent) { return &seen_[static_cast<std::size_t>(agent) * static_cast<std::size_t>(agents_)]; }
  const std::uint32_t* row(int agent) const {
    return &seen_[static_cast<std::size_t>(agent) * static_cast<std::size_t>(agents_)];
  }

  int agents_ = 0, span_ = 1;
  std::vector<std::uint32_t> seen_;        // agents × agents: row a is what agent a has seen of each agent
  std::vector<std::uint32_t> at_barrier_;  // each thread's clock at the last __syncthreads
};

}  // namespace tessera
