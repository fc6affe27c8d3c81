// The SIMT emulator's internal state (jit/simt_emulator.cpp runs blocks; jit/emu_async.cpp carries out the sm_90
// asynchronous instructions): a block's threads, shared memory and its shadow, mbarriers and warpgroup MMAs in
// flight, and the checks every access goes through; the blocks of a thread-block cluster run side by side on one
// worker, sharing one happens-before. Not part of tessera's API.
#pragma once

#include <atomic>
#include <functional>

#include <boost/context/detail/fcontext.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "generator/core/emulation_options.hpp"
#include "jit/emu_happens_before.hpp"
#include "jit/simt_emulator.hpp"
#include "tessera/emu/api.cuh"

namespace tessera::emulator {

namespace ctx = boost::context::detail;
using tessera_emu::Dim3;
using Entry = void (*)(const void* params);

constexpr std::size_t kStackBytes = 128 << 10;
constexpr std::size_t kGuardBytes = 4096;
constexpr unsigned kRedZone = 256;  // bytes poisoned on each side of the shared arena

enum class State : unsigned char { Runnable, Barrier, Warp, MBarrier, NamedBarrier, ClusterBarrier, Done };
constexpr int kMaxMBarriers = 64;  // per block: each has an async agent for the copies completing on it
enum class WarpOp : unsigned char { None, SyncWarp, Ldmatrix, Mma, Shuffle, Wgmma };

// A warpgroup MMA in flight: the shared words it reads stay pinned until a thread of the group retires it (the MMA
// has then completed for all of them); each thread's accumulators land when that thread retires it.
struct WgmmaOp {
  std::vector<unsigned> words;
  bool retired = false;
  VectorClock read;  // what the reads of its operands published: a thread that retires it has seen them
};
struct WgmmaResult {
  float* d;
  std::vector<float> values;
  std::shared_ptr<WgmmaOp> op;
};

struct Copy {
  unsigned dst, size, src_bytes;
  const char* src;
};

// A memory access a lane made, for the profile: the call site tells which instruction it was, so that the lanes of
// a warp are matched by instruction and occurrence even where some skip it.
enum class AccessKind : unsigned char {
  SharedLoad,
  SharedStore,
  CpAsyncShared,
  GlobalLoad,
  GlobalStore,
  CpAsyncGlobal
};
struct Access {
  const void* site;
  AccessKind kind;
  unsigned bytes;
  std::uint64_t address;  // a shared offset or a global address
};

struct Thread {
  tessera_emu::ThreadIndex index{};
  ctx::fcontext_t context = nullptr;    // where this fiber resumes
  ctx::fcontext_t scheduler = nullptr;  // where it returns when it blocks
  State state = State::Runnable;
  int barrier_line = 0;
  std::vector<std::vector<Copy>> groups;  // committed cp.async groups, oldest first
  std::vector<Copy> open_group;
  std::vector<std::vector<WgmmaResult>> wgmma_groups;  // committed warpgroup MMAs, oldest first
  std::vector<WgmmaResult> wgmma_open;
  // TMA stores this thread issued (shared offset, bytes): committed groups oldest first, and the open one.
  std::vector<std::vector<std::pair<unsigned, unsigned>>> store_groups;
  std::vector<std::pair<unsigned, unsigned>> store_open;
  std::uint32_t proxy_fences = 0;             // fence.proxy.async executed so far
  unsigned long long desc_a = 0, desc_b = 0;  // a wgmma's operands
  int transpose = 0;                          // and which of them are M/N-major (bit 0 A, bit 1 B)
  std::vector<Access> accesses;               // since the last barrier, when profiling
  // The warp collective this lane waits in, with its operands.
  WarpOp op = WarpOp::None;
  unsigned mask = 0, offset = 0, value = 0, result = 0;
  int kind = 0, count = 0, arg = 0;
  unsigned wait_offset = 0;  // the mbarrier this thread waits on (State::MBarrier)
  bool trans = false;
  unsigned* regs = nullptr;
  float* d = nullptr;
  const unsigned *a = nullptr, *b = nullptr;
};

// Who last touched a 4-byte word of shared memory (agent and clock stamp): the last writer and up to two readers
// since, that are not ordered before one another.
struct Shadow {
  int writer = -1, reader = -1, reader2 = -1;
  std::uint32_t writer_stamp = 0, reader_stamp = 0, reader2_stamp = 0;
  std::uint32_t writer_fences = 0;  // the writing thread's fence.proxy.async count when it wrote
};

// An mbarrier (PTX ISA 9.7.13.15) at an 8-byte-aligned shared offset: arrivals and transaction bytes pending in the
// current phase; a phase completes when both reach zero, and its parity flips. Its clocks: what the arrivals and
// copies of the current phase released, and what the last completed phase of each parity published.
struct MBarrier {
  unsigned offset = 0;
  int expected = 0, pending = 0;
  std::int64_t tx = 0;
  unsigned phase = 0;  // parity of the current (incomplete) phase
  int initialised_by = -1;
  std::uint32_t init_stamp = 0;
  VectorClock arrived;
  std::array<VectorClock, 2> completed;
};

// The workers of one launch. A GPU keeps a grid's blocks resident side by side, so a block may wait on a flag that
// a later block sets; when every running worker waits on one, another worker starts on the blocks not yet taken
// (`add_worker`, false when none is left: a deadlock).
struct GridWorkers {
  std::atomic<int> running{0};  // workers that have not taken their last block
  std::atomic<int> waiting{0};  // of those, the ones waiting on a flag
  std::function<bool()> add_worker;
};

// A named barrier (bar.sync / bar.arrive with an id of 1-15): the threads its current round expects, those arrived,
// what their arrivals published, and the arrived threads that wait for the round to complete.
struct NamedBarrier {
  int expected = 0, arrived = 0;
  VectorClock released;
  std::vector<int> waiters;
};
constexpr int kNamedBarriers = 16;

struct Block {
  const EmuLaunch* launch = nullptr;
  // The cluster this block runs in (itself alone without clusters), its rank there, and where its agents start in
  // the cluster's happens-before (threads, then one TMA unit per mbarrier).
  std::vector<Block>* cluster = nullptr;
  unsigned rank = 0;
  int agent_base = 0;
  GridWorkers* workers = nullptr;
  const EmuOptions* options = nullptr;
  Entry entry = nullptr;
  Dim3 block_idx{};
  std::vector<Thread> threads;
  std::vector<char> arena;  // red zone | shared memory | red zone
  std::vector<Shadow> shadow;
  std::vector<std::uint16_t> in_flight;     // per 4-byte word: cp.async copies not yet landed
  HappensBefore* hb = nullptr;              // the cluster's
  std::vector<MBarrier> mbarriers;          // in order of initialisation; the i-th's copies are agent threads + i
  std::vector<std::uint8_t> mbarrier_word;  // per 4-byte word: part of a live mbarrier
  std::vector<std::uint16_t> wgmma_pins;    // per 4-byte word: warpgroup MMAs in flight that read it
  int wgmma_in_flight = 0;
  std::array<NamedBarrier, kNamedBarriers> named;  // 0 unused: __syncthreads is barrier 0
  std::vector<std::uint16_t> store_pins;           // per 4-byte word: TMA stores in flight that read it
  int stores_in_flight = 0;
  int current = -1;
  bool in_fiber = false;
  std::string error;
  std::mt19937_64 rng;
  EmuProfile profile;       // this worker's counts, added to the caller's after the launch
  bool collective = false;  // reads on behalf of a warp collective, which counts them itself

  char* shared() { return arena.data() + kRedZone; }
  Thread& me() { return threads[static_cast<std::size_t>(current)]; }
  // Agents in the cluster's happens-before: thread `tid` of this block, the running thread, the TMA unit of the
  // i-th mbarrier.
  int agent(int tid) const { return agent_base + tid; }
  int agent() const { return agent_base + current; }
  int unit(int i) const { return agent_base + static_cast<int>(threads.size()) + i; }
  // The thread of this block that is agent `a`, or -1 (a unit, or an agent of another block).
  int thread_of(int a) const {
    const int t = a - agent_base;
    return t >= 0 && t < static_cast<int>(threads.size()) ? t : -1;
  }
  bool exited() const {
    for (const Thread& t : threads)
      if (t.state != State::Done) return false;
    return true;
  }
  int warp_of(int tid) const { return tid / 32; }
};

// The block whose fiber the calling worker thread is running (t_fiber), and the block whose shared memory an access
// goes to (t_block): the same, but while a thread reaches into another block of its cluster.
extern thread_local Block* t_block;
extern thread_local Block* t_fiber;

// Points t_block at another block of the cluster while an access reaches into it.
class OnBlock {
 public:
  explicit OnBlock(Block& b) : saved_(t_block) { t_block = &b; }
  ~OnBlock() { t_block = saved_; }
  OnBlock(const OnBlock&) = delete;
  OnBlock& operator=(const OnBlock&) = delete;

 private:
  Block* saved_;
};

std::string block_name(const Block& b);  // "block (x, y, z)"
std::string thread_name(const Block& b, int tid);
// An agent of b's cluster, named as seen from b.
std::string agent_name(const Block& b, int agent);
// Back to the scheduler (the thread's state says why).
void yield();
// Records the first bug and leaves the fiber for good (throws outside a fiber).
[[noreturn]] void fail(std::string what);
void wait_in_warp(WarpOp op);

// Checks of a shared or global access; each fails naming what was wrong.
void check_shared(unsigned offset, unsigned bytes, const char* what);
void check_in_flight(unsigned offset, unsigned bytes, const char* what);
void check_not_mbarrier(unsigned offset, unsigned bytes, const char* what);
void check_not_pinned(unsigned offset, unsigned bytes, const char* what);
void check_global(const void* address, unsigned bytes, const char* what);
// Race check and bookkeeping: an access by `agent`, ordered after what `viewer` has seen.
void track_as(int viewer, int agent, unsigned offset, unsigned bytes, bool write);
void track(int tid, unsigned offset, unsigned bytes, bool write);
// A shared read on behalf of thread `provider` (a collective's operand), checked as that thread's.
void read_shared_for(Block& b, int provider, unsigned offset, unsigned bytes, void* out);

// The sm_90 asynchronous instructions (jit/emu_async.cpp).
void api_mbarrier_init(unsigned offset, unsigned count);
void api_mbarrier_arrive(unsigned offset, unsigned tx_bytes);
void api_mbarrier_expect_tx(unsigned offset, unsigned tx_bytes);
int api_mbarrier_try_wait(unsigned offset, unsigned parity);
void api_mbarrier_wait(unsigned offset, unsigned parity);
void api_tma_load(unsigned dst, const void* map, const int* coords, unsigned mbarrier);
void api_wgmma(int kind, int n, float* d, unsigned long long a, unsigned long long b, int accumulate, int transpose);
void api_wgmma_commit();
void api_wgmma_wait(int pending);
void api_tma_store(const void* map, unsigned src, const int* coords);
void api_tma_store_commit();
void api_tma_store_wait();
void api_fence_proxy_async();
void api_named_barrier(int id, int threads, int wait);
// Thread-block clusters (jit/emu_cluster.cpp).
void api_cluster_sync(int line);
void api_mbarrier_arrive_cluster(unsigned offset, unsigned rank);
void api_tma_load_multicast(unsigned dst, const void* map, const int* coords, unsigned mbarrier, unsigned mask);
// Releases the cluster barrier once every thread of the cluster waits at it; reports one that some exited before.
bool resolve_cluster_barrier(std::vector<Block>& cluster);
// The parts of the sm_90 instructions the cluster ones share: a TMA box into the shared memory of t_block, an arrive
// on one of its mbarriers, each on behalf of agent `viewer` (the issuing thread, maybe of another block).
void load_box(unsigned dst, const void* map, const int* coords, unsigned mbarrier, int viewer);
void arrive_on(unsigned offset, unsigned tx_bytes, int viewer);
void api_wgmma_registers(int kind, int n, float* d, const unsigned* a, unsigned long long b, int accumulate,
                         int transpose);
// TMA (the async proxy) may touch shared bytes a thread wrote (the generic proxy) only after that thread's
// fence.proxy.async: reports the first word written since its writer's last fence.
void check_async_visible(unsigned offset, unsigned bytes, const char* what);
void run_wgmma(Block& b, int group);

}  // namespace tessera::emulator
