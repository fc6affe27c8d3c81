#include "jit/simt_emulator.hpp"

#include <dlfcn.h>
#include <sys/mman.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/context/detail/fcontext.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <tuple>

#include "generator/core/dtype.hpp"
#include "jit/emu_block.hpp"
#include "jit/host_kernel_compiler.hpp"
#include "tessera/emu/api.cuh"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace tessera {
namespace emulator {

thread_local Block* t_block = nullptr;
thread_local Block* t_fiber = nullptr;

// AddressSanitizer must be told when execution moves to another stack (fiber or scheduler), or it takes the fiber
// stacks for overflows of the thread's own. `fake` is ASan's fake stack of the side being left (null when a fiber
// leaves for good). Without ASan these are nothing.
#if defined(__SANITIZE_ADDRESS__)
thread_local const void* t_scheduler_stack = nullptr;
thread_local std::size_t t_scheduler_stack_bytes = 0;
void leaving_for(void** fake, const void* bottom, std::size_t bytes) {
  __sanitizer_start_switch_fiber(fake, bottom, bytes);
}
void arrived(void* fake) { __sanitizer_finish_switch_fiber(fake, nullptr, nullptr); }
void fiber_started() { __sanitizer_finish_switch_fiber(nullptr, &t_scheduler_stack, &t_scheduler_stack_bytes); }
void leaving_for_scheduler(void** fake) { leaving_for(fake, t_scheduler_stack, t_scheduler_stack_bytes); }
// A fiber stack reused: frames abandoned on it (a thread that failed) left their red zones poisoned.
void fresh_stack(void* bottom, std::size_t bytes) { ASAN_UNPOISON_MEMORY_REGION(bottom, bytes); }
#else
void fresh_stack(void*, std::size_t) {}
void leaving_for(void**, const void*, std::size_t) {}
void arrived(void*) {}
void fiber_started() {}
void leaving_for_scheduler(void**) {}
#endif

// Fiber stacks of one worker, with a guard page under each.
class Stacks {
 public:
  explicit Stacks(unsigned count) : count_(count) {
    bytes_ = count_ * (kStackBytes + kGuardBytes);
    memory_ = static_cast<char*>(mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (memory_ == MAP_FAILED) throw Error("emulator: cannot map fiber stacks");
    for (unsigned i = 0; i < count_; ++i) mprotect(memory_ + i * (kStackBytes + kGuardBytes), kGuardBytes, PROT_NONE);
  }
  // Unpoisoned first: memory mapped later at these addresses must not inherit the red zones of abandoned frames.
  ~Stacks() {
    fresh_stack(memory_, bytes_);
    munmap(memory_, bytes_);
  }
  Stacks(const Stacks&) = delete;
  Stacks& operator=(const Stacks&) = delete;
  // The top of stack i (stacks grow down).
  void* top(unsigned i) const { return memory_ + (i + 1) * (kStackBytes + kGuardBytes); }

 private:
  unsigned count_;
  std::size_t bytes_;
  char* memory_;
};

std::string block_name(const Block& b) {
  return fmt::format("block ({}, {}, {})", b.block_idx.x, b.block_idx.y, b.block_idx.z);
}

std::string thread_name(const Block& b, int tid) { return fmt::format("thread {} of {}", tid, block_name(b)); }

// "0-15, 17, 20-31"
std::string ranges(const std::vector<int>& ids) {
  std::string text;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    text += (text.empty() ? "" : ", ") + (i == j ? std::to_string(ids[i]) : fmt::format("{}-{}", ids[i], ids[j]));
    i = j + 1;
  }
  return text;
}

void yield() {
  Thread& t = t_fiber->me();
  void* fake = nullptr;
  leaving_for_scheduler(t.state == State::Done ? nullptr : &fake);
  const ctx::transfer_t back = ctx::jump_fcontext(t.scheduler, nullptr);
  arrived(fake);
  t.scheduler = back.fctx;
}

// Records the first bug and leaves the fiber for good: kernel frames are abandoned, never unwound.
// Outside a fiber (a warp collective carried out by the scheduler) it throws instead.
// `what` is taken by value (the callers' temporaries become it) and emptied, like the message: the frames left
// behind must own no heap memory.
[[noreturn]] void fail(std::string what) {
  Block& b = *t_fiber;
  std::string message = fmt::format("kernel {}: {}: {}", b.launch->kernel, thread_name(b, b.current), what);
  std::string().swap(what);
  if (!b.in_fiber) throw EmulationError(message);
  if (b.error.empty()) b.error = std::move(message);
  std::string().swap(message);
  b.me().state = State::Done;
  yield();
  __builtin_unreachable();
}

void check_shared(unsigned offset, unsigned bytes, const char* what) {
  const unsigned size = t_block->launch->shared_bytes;
  if (static_cast<std::uint64_t>(offset) + bytes > size)
    fail(fmt::format("shared-memory overflow: {} of {} bytes at offset {} is outside the block's {} bytes", what, bytes,
                     offset, size));
}

// An agent of b's cluster, named as seen from b: "thread 5", "thread 5 of block (1, 0, 0)", or the TMA unit.
std::string agent_name(const Block& b, int agent) {
  const int span = static_cast<int>(b.threads.size()) + kMaxMBarriers;
  const Block& owner = (*b.cluster)[static_cast<std::size_t>(agent / span)];
  const std::string of = &owner == &b ? "" : " of " + block_name(owner);
  if (const int t = owner.thread_of(agent); t >= 0) return fmt::format("thread {}{}", t, of);
  const std::size_t unit = static_cast<std::size_t>(agent - owner.unit(0));
  return fmt::format("the TMA copies completing on the mbarrier at offset {}{}",
                     unit < owner.mbarriers.size() ? owner.mbarriers[unit].offset : 0u, of);
}

// Race check and bookkeeping for an access to shared bytes [offset, offset + bytes) of t_block: made by `agent`
// (stamped with its clock), ordered after what `viewer` has seen (the agent itself, or the thread that issued a
// copy, maybe in another block of the cluster). Agents are the cluster's.
void track_as(int viewer, int agent, unsigned offset, unsigned bytes, bool write) {
  Block& b = *t_block;
  if (!b.options->detect_races) return;
  const std::uint32_t stamp = b.hb->clock(agent);
  for (unsigned w = offset / 4; w < (offset + bytes + 3) / 4; ++w) {
    Shadow& s = b.shadow[w];
    const auto race = [&](int other, const char* other_did) {
      // The failing thread is named by fail(); a copy it issued is named here.
      const std::string subject = agent == viewer ? "it " : "a copy it issued to ";
      fail(fmt::format("shared-memory race at offset {}{}: {}{} bytes that {} {} without an ordering barrier", w * 4,
                       &b == t_fiber ? "" : " of " + block_name(b), subject, write ? "writes" : "reads",
                       agent_name(b, other), other_did));
    };
    const auto unordered = [&](int other, std::uint32_t other_stamp) {
      return other >= 0 && other != agent && !b.hb->ordered(other, other_stamp, viewer);
    };
    if (unordered(s.writer, s.writer_stamp)) race(s.writer, "wrote");
    if (write) {
      if (unordered(s.reader, s.reader_stamp)) race(s.reader, "read");
      if (unordered(s.reader2, s.reader2_stamp)) race(s.reader2, "read");
      s.writer = agent, s.writer_stamp = stamp, s.reader = s.reader2 = -1;
      if (const int t = b.thread_of(agent); t >= 0)
        s.writer_fences = b.threads[static_cast<std::size_t>(t)].proxy_fences;
    } else if (s.reader < 0 || s.reader == agent || !unordered(s.reader, s.reader_stamp)) {
      s.reader = agent, s.reader_stamp = stamp;
    } else {
      s.reader2 = agent, s.reader2_stamp = stamp;
    }
  }
}

void track(int tid, unsigned offset, unsigned bytes, bool write) {
  const int agent = t_block->agent(tid);
  track_as(agent, agent, offset, bytes, write);
}

void check_async_visible(unsigned offset, unsigned bytes, const char* what) {
  const Block& b = *t_block;
  if (!b.options->detect_races) return;
  for (unsigned w = offset / 4; w < (offset + bytes + 3) / 4; ++w) {
    const Shadow& s = b.shadow[w];
    const int writer = s.writer >= 0 ? b.thread_of(s.writer) : -1;
    if (writer >= 0 && b.threads[static_cast<std::size_t>(writer)].proxy_fences == s.writer_fences)
      fail(
          fmt::format("{} shared bytes at offset {} that thread {} wrote with no fence.proxy.async since (its "
                      "generic-proxy write is not ordered with the copy engine's access)",
                      what, w * 4, writer));
  }
}

void api_fence_proxy_async() { ++t_block->me().proxy_fences; }

void check_in_flight(unsigned offset, unsigned bytes, const char* what) {
  const Block& b = *t_block;
  for (unsigned w = offset / 4; w < (offset + bytes + 3) / 4; ++w)
    if (b.in_flight[w])
      fail(
          fmt::format("{} shared bytes at offset {} while a cp.async to them is in flight (missing "
                      "cp.async.wait_group or barrier?)",
                      what, w * 4));
}

void check_global(const void* address, unsigned bytes, const char* what) {
  const auto* p = static_cast<const char*>(address);
  for (const auto& range : t_block->launch->global) {
    const auto* begin = static_cast<const char*>(range.begin);
    if (p >= begin && p + bytes <= begin + range.bytes) return;
  }
  fail(fmt::format("out-of-bounds global {} of {} bytes at {}", what, bytes, address));
}

// --- the profile ---

void record(AccessKind kind, std::uint64_t address, unsigned bytes, const void* site) {
  Block& b = *t_block;
  if (!b.options->profile || b.collective) return;
  b.me().accesses.push_back({site, kind, bytes, address});
}

struct LaneAccess {
  int lane;
  std::uint64_t address;
  unsigned bytes;
};

// Wavefronts of one warp-level shared-memory request: its lanes go in phases of 128 bytes (32 lanes of 4 bytes, 16 of
// 8, 8 of 16); within a phase, a bank serving several different 4-byte words serves them one per wavefront.
void count_shared(const std::vector<LaneAccess>& lanes, EmuAccessCounters& c) {
  unsigned widest = 4;
  for (const LaneAccess& a : lanes) widest = std::max(widest, a.bytes);
  const int per_phase = static_cast<int>(128 / std::min(widest, 16u));
  ++c.requests;
  for (int phase = 0; phase * per_phase < 32; ++phase) {
    std::array<std::vector<std::uint64_t>, 32> words;
    bool any = false;
    for (const LaneAccess& a : lanes) {
      if (a.lane / per_phase != phase) continue;
      any = true;
      for (std::uint64_t w = a.address / 4; w <= (a.address + a.bytes - 1) / 4; ++w) {
        auto& bank = words[w % 32];
        if (std::find(bank.begin(), bank.end(), w) == bank.end()) bank.push_back(w);
      }
    }
    if (!any) continue;
    std::size_t most = 1;
    for (const auto& bank : words) most = std::max(most, bank.size());
    c.transactions += most;
    ++c.ideal;
  }
}

// Sectors of one warp-level global request, against the bytes it moves.
void count_global(const std::vector<LaneAccess>& lanes, EmuAccessCounters& c) {
  std::vector<std::uint64_t> sectors;
  std::vector<std::pair<std::uint64_t, unsigned>> distinct;
  for (const LaneAccess& a : lanes) {
    for (std::uint64_t s = a.address / 32; s <= (a.address + a.bytes - 1) / 32; ++s) sectors.push_back(s);
    distinct.emplace_back(a.address, a.bytes);
  }
  std::sort(sectors.begin(), sectors.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::uint64_t bytes = 0;
  for (const auto& d : distinct) bytes += d.second;
  ++c.requests;
  c.transactions += static_cast<std::uint64_t>(std::unique(sectors.begin(), sectors.end()) - sectors.begin());
  c.ideal += (bytes + 31) / 32;
}

EmuAccessCounters& counters(EmuProfile& p, AccessKind kind) {
  switch (kind) {
    case AccessKind::SharedLoad:
      return p.shared_load;
    case AccessKind::SharedStore:
      return p.shared_store;
    case AccessKind::CpAsyncShared:
      return p.cp_async_shared;
    case AccessKind::GlobalLoad:
      return p.global_load;
    case AccessKind::GlobalStore:
      return p.global_store;
    default:
      return p.cp_async_global;
  }
}

// Counts the accesses logged since the last barrier, warp by warp: the lanes' n-th accesses from one call site form
// one request.
void count_accesses(Block& b) {
  if (!b.options->profile) return;
  const int warps = static_cast<int>(b.threads.size() / 32);
  for (int w = 0; w < warps; ++w) {
    std::map<std::tuple<const void*, AccessKind, std::size_t>, std::vector<LaneAccess>> requests;
    for (int l = 0; l < 32; ++l) {
      Thread& t = b.threads[static_cast<std::size_t>(w * 32 + l)];
      std::map<std::pair<const void*, AccessKind>, std::size_t> seen;
      for (const Access& a : t.accesses)
        requests[{a.site, a.kind, seen[{a.site, a.kind}]++}].push_back({l, a.address, a.bytes});
      t.accesses.clear();
    }
    for (const auto& [key, lanes] : requests) {
      const AccessKind kind = std::get<1>(key);
      const bool shared =
          kind == AccessKind::SharedLoad || kind == AccessKind::SharedStore || kind == AccessKind::CpAsyncShared;
      if (shared)
        count_shared(lanes, counters(b.profile, kind));
      else
        count_global(lanes, counters(b.profile, kind));
    }
  }
}

// --- the Api functions the kernel calls ---

const tessera_emu::ThreadIndex* api_index() { return &t_fiber->me().index; }

void api_syncthreads(int line) {
  Thread& t = t_block->me();
  t.state = State::Barrier;
  t.barrier_line = line;
  yield();
}

// A thread arrives at a named barrier (and with `wait` sleeps until its round completes): the round's arrivals happen
// before what its waiters do next. Threads that arrive without waiting (producer/consumer hand-offs) may leave a round
// incomplete when the kernel ends.
void api_named_barrier(int id, int threads, int wait) {
  Block& b = *t_block;
  if (id < 1 || id >= kNamedBarriers)
    fail(fmt::format("named barrier {}: ids are 1 to {} (0 is __syncthreads')", id, kNamedBarriers - 1));
  if (threads <= 0 || threads % 32 != 0 || threads > static_cast<int>(b.threads.size()))
    fail(fmt::format("named barrier {} for {} threads: a multiple of 32 up to the block's {}", id, threads,
                     b.threads.size()));
  NamedBarrier& nb = b.named[static_cast<std::size_t>(id)];
  if (nb.arrived == 0) nb.expected = threads;
  if (nb.expected != threads)
    fail(fmt::format("named barrier {}: arrives for {} threads in a round that expects {}", id, threads, nb.expected));
  b.hb->release(b.agent(), nb.released);
  ++nb.arrived;
  if (wait) nb.waiters.push_back(b.current);
  if (nb.arrived == nb.expected) {
    for (int w : nb.waiters) {
      b.hb->acquire(b.agent(w), nb.released);
      b.threads[static_cast<std::size_t>(w)].state = State::Runnable;
    }
    nb = NamedBarrier{};
    return;
  }
  if (!wait) return;
  Thread& t = b.me();
  t.state = State::NamedBarrier;
  t.wait_offset = static_cast<unsigned>(id);
  yield();
}

void wait_in_warp(WarpOp op) {
  Thread& t = t_block->me();
  t.op = op;
  t.state = State::Warp;
  yield();
}

void api_syncwarp(unsigned mask) {
  t_block->me().mask = mask;
  wait_in_warp(WarpOp::SyncWarp);
}

// An mbarrier is changed only by its own instructions: a plain access to its bytes is a bug.
void check_not_mbarrier(unsigned offset, unsigned bytes, const char* what) {
  const Block& b = *t_block;
  if (b.mbarriers.empty()) return;
  for (unsigned w = offset / 4; w < (offset + bytes + 3) / 4; ++w)
    if (b.mbarrier_word[w]) fail(fmt::format("{} shared bytes at offset {}, which hold an mbarrier", what, w * 4));
}

// Shared bytes a warpgroup MMA or a TMA store in flight reads may not change until it is retired.
void check_not_pinned(unsigned offset, unsigned bytes, const char* what) {
  const Block& b = *t_block;
  const auto check = [&](int in_flight, const std::vector<std::uint16_t>& pins, const char* reader, const char* fix) {
    if (in_flight == 0) return;
    for (unsigned w = offset / 4; w < (offset + bytes + 3) / 4; ++w)
      if (pins[w])
        fail(fmt::format("{} shared bytes at offset {} that {} in flight still reads ({})", what, w * 4, reader, fix));
  };
  check(b.stores_in_flight, b.store_pins, "a TMA store", "a tma_store_wait before the box is overwritten?");
  check(b.wgmma_in_flight, b.wgmma_pins, "a wgmma", "a wgmma_wait before the tile is overwritten?");
}

void api_shared_load(unsigned offset, unsigned bytes, void* out) {
  record(AccessKind::SharedLoad, offset, bytes, __builtin_return_address(0));
  check_shared(offset, bytes, "read");
  check_in_flight(offset, bytes, "reads");
  check_not_mbarrier(offset, bytes, "reads");
  track(t_block->current, offset, bytes, false);
  std::memcpy(out, t_block->shared() + offset, bytes);
}

void api_shared_store(unsigned offset, unsigned bytes, const void* in) {
  record(AccessKind::SharedStore, offset, bytes, __builtin_return_address(0));
  check_shared(offset, bytes, "write");
  check_in_flight(offset, bytes, "writes");
  check_not_mbarrier(offset, bytes, "writes");
  check_not_pinned(offset, bytes, "writes");
  track(t_block->current, offset, bytes, true);
  std::memcpy(t_block->shared() + offset, in, bytes);
}

void api_global_load(const void* address, unsigned bytes, void* out) {
  record(AccessKind::GlobalLoad, reinterpret_cast<std::uintptr_t>(address), bytes, __builtin_return_address(0));
  check_global(address, bytes, "read");
  std::memcpy(out, address, bytes);
}

void api_global_store(void* address, unsigned bytes, const void* in) {
  record(AccessKind::GlobalStore, reinterpret_cast<std::uintptr_t>(address), bytes, __builtin_return_address(0));
  check_global(address, bytes, "write");
  std::memcpy(address, in, bytes);
}

void api_cp_async(unsigned dst, const void* src, unsigned size, unsigned src_bytes) {
  if (src_bytes > size) fail(fmt::format("cp.async src-size {} exceeds the copy size {}", src_bytes, size));
  if (dst % size) fail(fmt::format("cp.async of {} bytes to misaligned shared offset {}", size, dst));
  if (reinterpret_cast<std::uintptr_t>(src) % size)
    fail(fmt::format("cp.async of {} bytes from misaligned {}", size, src));
  check_shared(dst, size, "cp.async write");
  check_not_pinned(dst, size, "cp.async writes");
  if (src_bytes) check_global(src, src_bytes, "cp.async read");
  const void* site = __builtin_return_address(0);
  record(AccessKind::CpAsyncShared, dst, size, site);
  if (src_bytes) record(AccessKind::CpAsyncGlobal, reinterpret_cast<std::uintptr_t>(src), src_bytes, site);
  Block& b = *t_block;
  for (unsigned w = dst / 4; w < (dst + size + 3) / 4; ++w) ++b.in_flight[w];
  b.me().open_group.push_back({dst, size, src_bytes, static_cast<const char*>(src)});
}

void api_cp_async_commit() {
  Thread& t = t_block->me();
  t.groups.push_back(std::move(t.open_group));
  t.open_group.clear();
}

// The copies land now, as writes by the waiting thread: data a missing wait would have left stale stays stale.
void api_cp_async_wait(int pending) {
  Block& b = *t_block;
  Thread& t = b.me();
  while (static_cast<int>(t.groups.size()) > std::max(pending, 0)) {
    for (const Copy& c : t.groups.front()) {
      for (unsigned w = c.dst / 4; w < (c.dst + c.size + 3) / 4; ++w) --b.in_flight[w];
      track(b.current, c.dst, c.size, true);
      std::memcpy(b.shared() + c.dst, c.src, c.src_bytes);
      std::memset(b.shared() + c.dst + c.src_bytes, 0, c.size - c.src_bytes);
    }
    t.groups.erase(t.groups.begin());
  }
}

void api_ldmatrix(unsigned* regs, int count, int trans, unsigned offset) {
  Thread& t = t_block->me();
  t.regs = regs, t.count = count, t.trans = trans != 0, t.offset = offset, t.mask = 0xffffffffu;
  wait_in_warp(WarpOp::Ldmatrix);
}

void api_mma(int kind, float* d, const unsigned* a, const unsigned* b) {
  Thread& t = t_block->me();
  t.kind = kind, t.d = d, t.a = a, t.b = b, t.mask = 0xffffffffu;
  wait_in_warp(WarpOp::Mma);
}

unsigned api_shuffle(int kind, unsigned mask, unsigned value, int arg) {
  Thread& t = t_block->me();
  t.kind = kind, t.mask = mask, t.value = value, t.arg = arg;
  wait_in_warp(WarpOp::Shuffle);
  return t.result;
}

unsigned short api_f32_to_f16(float x) { return to_f16(x); }
float api_f16_to_f32(unsigned short h) { return from_f16(h); }
unsigned short api_f32_to_bf16(float x) { return to_bf16(x); }
unsigned api_f32_to_tf32(unsigned bits) {
  return __builtin_bit_cast(unsigned, round_tf32(__builtin_bit_cast(float, bits)));
}

// Flags between blocks. While every running worker waits on a flag, another worker starts on the blocks not yet
// taken (as a GPU keeps them resident); a wait with no block left to start is a deadlock.
void api_flag_add(int* address, int value) {
  check_global(address, sizeof(int), "flag add");
  std::atomic_ref<int>(*address).fetch_add(value, std::memory_order_release);
}

void api_flag_wait(const int* address, int value) {
  check_global(address, sizeof(int), "flag wait");
  std::atomic_ref<int> flag(*const_cast<int*>(address));
  if (flag.load(std::memory_order_acquire) >= value) return;
  GridWorkers& workers = *t_block->workers;
  ++workers.waiting;
  for (;;) {
    if (flag.load(std::memory_order_acquire) >= value) break;
    if (workers.waiting.load() >= workers.running.load() && !workers.add_worker() &&
        flag.load(std::memory_order_acquire) < value) {
      --workers.waiting;
      fail(
          fmt::format("deadlock: waits for the flag at {} to reach {} (it holds {}); the {} blocks running all wait "
                      "and no block is left to start",
                      static_cast<const void*>(address), value, flag.load(), workers.running.load()));
    }
    std::this_thread::yield();
  }
  --workers.waiting;
}

tessera_emu::Api g_api{api_index,
                       api_syncthreads,
                       api_syncwarp,
                       api_shared_load,
                       api_shared_store,
                       api_global_load,
                       api_global_store,
                       api_cp_async,
                       api_cp_async_commit,
                       api_cp_async_wait,
                       api_ldmatrix,
                       api_mma,
                       api_shuffle,
                       api_mbarrier_init,
                       api_mbarrier_arrive,
                       api_mbarrier_expect_tx,
                       api_mbarrier_try_wait,
                       api_mbarrier_wait,
                       api_tma_load,
                       api_wgmma,
                       api_wgmma_commit,
                       api_wgmma_wait,
                       api_f32_to_f16,
                       api_f16_to_f32,
                       api_f32_to_bf16,
                       api_f32_to_tf32,
                       api_flag_add,
                       api_flag_wait,
                       api_tma_store,
                       api_tma_store_commit,
                       api_tma_store_wait,
                       api_fence_proxy_async,
                       api_named_barrier,
                       api_wgmma_registers,
                       api_cluster_sync,
                       api_mbarrier_arrive_cluster,
                       api_tma_load_multicast};

// --- warp collectives, carried out by the scheduler once every lane has arrived ---

// A 32-bit word of shared memory read on behalf of lane `provider` (the lane that supplied the address).
void read_shared_for(Block& b, int provider, unsigned offset, unsigned bytes, void* out) {
  const int saved = b.current;
  b.current = provider;
  api_shared_load(offset, bytes, out);
  b.current = saved;
}

void run_ldmatrix(Block& b, int warp) {
  Thread* lanes = &b.threads[static_cast<std::size_t>(warp * 32)];
  const int count = lanes[0].count;
  const bool trans = lanes[0].trans;
  for (int i = 0; i < 32; ++i)
    if (lanes[i].count != count || lanes[i].trans != trans)
      throw EmulationError(fmt::format("kernel {}: ldmatrix shapes differ within warp {}", b.launch->kernel, warp));
  for (int m = 0; m < count; ++m)
    for (int r = 0; r < 8; ++r)
      if (lanes[m * 8 + r].offset % 16)
        throw EmulationError(fmt::format("kernel {}: {}: ldmatrix row address {} is not 16-byte aligned",
                                         b.launch->kernel, thread_name(b, warp * 32 + m * 8 + r),
                                         lanes[m * 8 + r].offset));
  if (b.options->profile) {
    // One phase per 8×8 matrix: its eight 16-byte rows.
    EmuAccessCounters& c = b.profile.ldmatrix;
    ++c.requests;
    for (int m = 0; m < count; ++m) {
      std::vector<LaneAccess> rows;
      for (int r = 0; r < 8; ++r) rows.push_back({r, lanes[m * 8 + r].offset, 16});
      EmuAccessCounters phase;
      count_shared(rows, phase);
      c.transactions += phase.transactions;
      c.ideal += phase.ideal;
    }
  }
  b.collective = true;
  for (int l = 0; l < 32; ++l)
    for (int m = 0; m < count; ++m) {
      unsigned word = 0;
      if (!trans) {
        // Lane l holds row l/4, 16-bit columns 2(l%4) and 2(l%4)+1 of matrix m.
        const int provider = warp * 32 + m * 8 + l / 4;
        read_shared_for(b, provider, lanes[m * 8 + l / 4].offset + (l % 4) * 4, 4, &word);
      } else {
        // Transposed: lane l holds rows 2(l%4) and 2(l%4)+1 of column l/4.
        std::uint16_t lo = 0, hi = 0;
        const int r0 = m * 8 + (l % 4) * 2;
        read_shared_for(b, warp * 32 + r0, lanes[r0].offset + (l / 4) * 2, 2, &lo);
        read_shared_for(b, warp * 32 + r0 + 1, lanes[r0 + 1].offset + (l / 4) * 2, 2, &hi);
        word = lo | (static_cast<unsigned>(hi) << 16);
      }
      lanes[l].regs[m] = word;
    }
  b.collective = false;
}

float decode(int kind, unsigned bits, int half) {
  const auto h = static_cast<std::uint16_t>(half ? bits >> 16 : bits & 0xffffu);
  switch (kind) {
    case tessera_emu::kMmaF16:
      return from_f16(h);
    case tessera_emu::kMmaBf16:
      return from_bf16(h);
    default:
      return __builtin_bit_cast(float, bits & 0xffffe000u);  // tf32: the low 13 mantissa bits are ignored
  }
}

// mma.sync with the PTX ISA fragment layouts (g = lane/4, t = lane%4).
void run_mma(Block& b, int warp) {
  Thread* lanes = &b.threads[static_cast<std::size_t>(warp * 32)];
  const int kind = lanes[0].kind;
  for (int i = 0; i < 32; ++i)
    if (lanes[i].kind != kind)
      throw EmulationError(fmt::format("kernel {}: mma.sync types differ within warp {}", b.launch->kernel, warp));
  const int k_depth = kind == tessera_emu::kMmaTf32 ? 8 : 16;
  float A[16][16] = {}, B[16][8] = {}, C[16][8] = {};
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    const Thread& x = lanes[l];
    if (kind == tessera_emu::kMmaTf32) {
      A[g][t] = decode(kind, x.a[0], 0), A[g + 8][t] = decode(kind, x.a[1], 0);
      A[g][t + 4] = decode(kind, x.a[2], 0), A[g + 8][t + 4] = decode(kind, x.a[3], 0);
      B[t][g] = decode(kind, x.b[0], 0), B[t + 4][g] = decode(kind, x.b[1], 0);
    } else {
      for (int h = 0; h < 2; ++h) {
        A[g][2 * t + h] = decode(kind, x.a[0], h), A[g + 8][2 * t + h] = decode(kind, x.a[1], h);
        A[g][2 * t + 8 + h] = decode(kind, x.a[2], h), A[g + 8][2 * t + 8 + h] = decode(kind, x.a[3], h);
        B[2 * t + h][g] = decode(kind, x.b[0], h), B[2 * t + 8 + h][g] = decode(kind, x.b[1], h);
      }
    }
    C[g][2 * t] = x.d[0], C[g][2 * t + 1] = x.d[1], C[g + 8][2 * t] = x.d[2], C[g + 8][2 * t + 1] = x.d[3];
  }
  for (int l = 0; l < 32; ++l) {
    const int g = l / 4, t = l % 4;
    const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
    for (int i = 0; i < 4; ++i) {
      // Products of 16-bit (or tf32) values are exact in double; the sum is rounded to f32 once.
      double sum = C[rows[i]][cols[i]];
      for (int k = 0; k < k_depth; ++k) sum += double{A[rows[i]][k]} * double{B[k][cols[i]]};
      lanes[l].d[i] = static_cast<float>(sum);
    }
  }
}

void run_shuffle(Block& b, int warp, unsigned mask) {
  Thread* lanes = &b.threads[static_cast<std::size_t>(warp * 32)];
  unsigned votes = 0;  // the ballot of the lanes in the mask
  for (int l = 0; l < 32; ++l)
    if (mask >> l & 1u && lanes[l].value != 0) votes |= 1u << l;
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1u)) continue;
    Thread& v = lanes[l];
    if (v.kind == tessera_emu::kVoteAll || v.kind == tessera_emu::kVoteAny || v.kind == tessera_emu::kBallot) {
      v.result = v.kind == tessera_emu::kBallot    ? votes
                 : v.kind == tessera_emu::kVoteAll ? static_cast<unsigned>(votes == mask)
                                                   : static_cast<unsigned>(votes != 0);
      continue;
    }
  }
  for (int l = 0; l < 32; ++l) {
    if (lanes[l].kind >= tessera_emu::kVoteAll) continue;
    if (!(mask >> l & 1u)) continue;
    Thread& x = lanes[l];
    int src = l;
    switch (x.kind) {
      case tessera_emu::kShuffleIdx:
        src = x.arg & 31;
        break;
      case tessera_emu::kShuffleXor:
        src = l ^ (x.arg & 31);
        break;
      case tessera_emu::kShuffleDown:
        src = l + x.arg < 32 ? l + x.arg : l;
        break;
      default:
        src = l - x.arg >= 0 ? l - x.arg : l;
    }
    x.result = mask >> src & 1u ? lanes[src].value : x.value;
  }
}

// Completes warp collectives whose participants have all arrived; returns whether any did.
bool resolve_warps(Block& b) {
  bool released = false;
  const int warps = static_cast<int>(b.threads.size() / 32);
  for (int w = 0; w < warps; ++w) {
    Thread* lanes = &b.threads[static_cast<std::size_t>(w * 32)];
    int leader = -1;
    for (int l = 0; l < 32 && leader < 0; ++l)
      if (lanes[l].state == State::Warp) leader = l;
    if (leader < 0) continue;
    const WarpOp op = lanes[leader].op;
    const unsigned mask = lanes[leader].mask;
    bool complete = true;
    std::vector<int> exited;
    for (int l = 0; l < 32; ++l) {
      if (!(mask >> l & 1u)) continue;
      if (lanes[l].state == State::Done) exited.push_back(w * 32 + l);
      if (lanes[l].state != State::Warp || lanes[l].op != op || lanes[l].mask != mask) complete = false;
    }
    if (!exited.empty())
      throw EmulationError(
          fmt::format("kernel {}: block ({}, {}, {}): a warp collective of warp {} waits for threads "
                      "{}, which exited",
                      b.launch->kernel, b.block_idx.x, b.block_idx.y, b.block_idx.z, w, ranges(exited)));
    if (!complete) continue;
    if (op == WarpOp::Wgmma) {
      // A warpgroup collective: run by its first warp once all four have arrived.
      if (w % 4 != 0) continue;
      if (w + 3 >= warps)
        throw EmulationError(
            fmt::format("kernel {}: wgmma in warp {} of a block of {} threads (whole warpgroups of "
                        "128 are needed)",
                        b.launch->kernel, w, b.threads.size()));
      bool group_complete = true;
      for (int i = 32; i < 128; ++i)
        group_complete = group_complete && lanes[i].state == State::Warp && lanes[i].op == WarpOp::Wgmma;
      if (!group_complete) continue;
      run_wgmma(b, w / 4);
      if (!b.error.empty()) return true;
      for (int i = 0; i < 128; ++i) lanes[i].state = State::Runnable, lanes[i].op = WarpOp::None;
      released = true;
      continue;
    }
    switch (op) {
      case WarpOp::Ldmatrix:
        run_ldmatrix(b, w);
        break;
      case WarpOp::Mma:
        run_mma(b, w);
        break;
      case WarpOp::Shuffle:
        run_shuffle(b, w, mask);
        break;
      default:
        break;
    }
    if (!b.error.empty()) return true;
    if (op == WarpOp::SyncWarp) {
      std::vector<int> group;
      for (int l = 0; l < 32; ++l)
        if (mask >> l & 1u) group.push_back(b.agent(w * 32 + l));
      b.hb->join(group);
    }
    for (int l = 0; l < 32; ++l)
      if (mask >> l & 1u) lanes[l].state = State::Runnable, lanes[l].op = WarpOp::None;
    released = true;
  }
  return released;
}

// What the threads that are neither at __syncthreads nor done wait for: warp collectives, or mbarrier phases.
std::vector<std::string> stuck_elsewhere(const Block& b, const std::vector<int>& elsewhere) {
  std::vector<int> in_warp, at_cluster;
  std::map<unsigned, std::vector<int>> on_mbarrier, on_named;
  for (int i : elsewhere) {
    const Thread& t = b.threads[static_cast<std::size_t>(i)];
    if (t.state == State::ClusterBarrier)
      at_cluster.push_back(i);
    else if (t.state == State::MBarrier)
      on_mbarrier[t.wait_offset].push_back(i);
    else if (t.state == State::NamedBarrier)
      on_named[t.wait_offset].push_back(i);
    else
      in_warp.push_back(i);
  }
  std::vector<std::string> parts;
  for (const auto& [id, ids] : on_named) {
    const NamedBarrier& nb = b.named[id];
    parts.push_back(fmt::format("threads {} wait at named barrier {}, which {} of {} threads have reached", ranges(ids),
                                id, nb.arrived, nb.expected));
  }
  if (!in_warp.empty())
    parts.push_back(fmt::format("threads {} wait in warp collectives that cannot complete", ranges(in_warp)));
  if (!at_cluster.empty()) parts.push_back(fmt::format("threads {} wait at the cluster barrier", ranges(at_cluster)));
  for (const auto& [offset, ids] : on_mbarrier)
    for (const MBarrier& m : b.mbarriers)
      if (m.offset == offset)
        parts.push_back(fmt::format(
            "threads {} wait on the mbarrier at offset {}, whose phase of parity {} never completes ({} of {} "
            "arrivals and {} transaction bytes outstanding)",
            ranges(ids), offset, m.phase, m.pending, m.expected, m.tx));
  return parts;
}

// Releases a barrier every live thread has reached; reports one that only some reach.
bool resolve_barrier(Block& b, bool stuck) {
  std::vector<int> waiting, exited, elsewhere;
  std::vector<int> lines;
  for (int i = 0; i < static_cast<int>(b.threads.size()); ++i) {
    const Thread& t = b.threads[static_cast<std::size_t>(i)];
    if (t.state == State::Barrier) {
      waiting.push_back(i);
      if (std::find(lines.begin(), lines.end(), t.barrier_line) == lines.end()) lines.push_back(t.barrier_line);
    } else if (t.state == State::Done) {
      exited.push_back(i);
    } else {
      elsewhere.push_back(i);
    }
  }
  if (waiting.empty() || !elsewhere.empty()) {
    if (!stuck) return false;
    std::vector<std::string> parts;
    if (!waiting.empty()) parts.push_back(fmt::format("threads {} wait at __syncthreads", ranges(waiting)));
    for (std::string& part : stuck_elsewhere(b, elsewhere)) parts.push_back(std::move(part));
    throw EmulationError(
        fmt::format("kernel {}: {}: deadlock: {}", b.launch->kernel, block_name(b), fmt::join(parts, "; ")));
  }
  if (!exited.empty())
    throw EmulationError(fmt::format(
        "kernel {}: block ({}, {}, {}): divergent __syncthreads: threads {} wait at the "
        "barrier (line {}) but threads {} exited without reaching it",
        b.launch->kernel, b.block_idx.x, b.block_idx.y, b.block_idx.z, ranges(waiting), lines[0], ranges(exited)));
  if (lines.size() > 1)
    throw EmulationError(
        fmt::format("kernel {}: block ({}, {}, {}): divergent __syncthreads: threads wait at "
                    "different barriers (lines {} and {})",
                    b.launch->kernel, b.block_idx.x, b.block_idx.y, b.block_idx.z, lines[0], lines[1]));
  count_accesses(b);
  b.hb->barrier(b.agent(0), static_cast<int>(b.threads.size()));
  for (Thread& t : b.threads) t.state = State::Runnable;
  return true;
}

void fiber_entry(ctx::transfer_t transfer) {
  fiber_started();
  Block& b = *t_block;
  Thread& t = b.me();
  t.scheduler = transfer.fctx;
  b.entry(b.launch->params.data());
  if (!t.open_group.empty() || !t.groups.empty()) {
    // Copies still in flight when a thread exits land eventually on hardware; here they land now.
    api_cp_async_commit();
    api_cp_async_wait(0);
  }
  if (!t.wgmma_open.empty() || !t.wgmma_groups.empty()) {
    api_wgmma_commit();
    api_wgmma_wait(0);
  }
  if (!t.store_open.empty() || !t.store_groups.empty())
    fail("exits with TMA stores that may still read its shared memory (committed and waited with tma_store_wait?)");
  t.state = State::Done;
  yield();
}

// A block's threads as fresh fibers on stacks [first_stack, first_stack + threads), its shared memory and
// bookkeeping reset.
void start_block(Block& b, const Stacks& stacks, unsigned first_stack) {
  const unsigned n = b.launch->block;
  b.threads.assign(n, Thread{});
  std::fill(b.arena.begin(), b.arena.end(), static_cast<char>(0xa5));
  std::fill(b.shadow.begin(), b.shadow.end(), Shadow{});
  std::fill(b.in_flight.begin(), b.in_flight.end(), 0);
  b.mbarriers.clear();
  std::fill(b.mbarrier_word.begin(), b.mbarrier_word.end(), 0);
  std::fill(b.wgmma_pins.begin(), b.wgmma_pins.end(), 0);
  b.wgmma_in_flight = 0;
  std::fill(b.store_pins.begin(), b.store_pins.end(), 0);
  b.stores_in_flight = 0;
  b.named = {};
  const auto size = static_cast<unsigned>(b.cluster->size());
  for (unsigned i = 0; i < n; ++i) {
    Thread& t = b.threads[i];
    t.index = {{i, 0, 0}, b.block_idx, {n, 1, 1}, {b.launch->grid_x, b.launch->grid_y, b.launch->grid_z}, b.rank, size};
    fresh_stack(static_cast<char*>(stacks.top(first_stack + i)) - kStackBytes, kStackBytes);
    t.context = ctx::make_fcontext(stacks.top(first_stack + i), kStackBytes, fiber_entry);
  }
}

// Resumes each runnable thread of b once; returns whether any ran.
bool run_threads(Block& b, const Stacks& stacks, unsigned first_stack, std::vector<int>& order) {
  if (b.options->schedule == EmuSchedule::Shuffle) std::shuffle(order.begin(), order.end(), b.rng);
  bool ran = false;
  for (int i : order) {
    Thread& t = b.threads[static_cast<std::size_t>(i)];
    if (t.state != State::Runnable) continue;
    b.current = i;
    b.in_fiber = true;
    t_block = t_fiber = &b;
    void* fake = nullptr;
    const auto stack = first_stack + static_cast<unsigned>(i);
    leaving_for(&fake, static_cast<const char*>(stacks.top(stack)) - kStackBytes, kStackBytes);
    const ctx::transfer_t back = ctx::jump_fcontext(t.context, nullptr);
    arrived(fake);
    t_block = t_fiber = &b;  // a thread that failed while reaching into another block left t_block there
    b.in_fiber = false;
    t.context = back.fctx;
    ran = true;
    if (!b.error.empty()) throw EmulationError(b.error);
  }
  return ran;
}

// Runs the blocks of one cluster (one block without clusters) to completion, side by side: a block's thread may
// wait on another's (an mbarrier a peer's copies or arrivals complete, the cluster barrier).
void run_cluster(std::vector<Block>& cluster, HappensBefore& hb, const Stacks& stacks) {
  const unsigned n = cluster.front().launch->block;
  hb.reset(static_cast<int>(cluster.size()), static_cast<int>(n) + kMaxMBarriers);
  for (unsigned r = 0; r < cluster.size(); ++r) start_block(cluster[r], stacks, r * n);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (cluster.front().options->schedule == EmuSchedule::Reverse) std::reverse(order.begin(), order.end());
  // Forward: the blocks in lockstep, each runnable thread once a round. Reverse: the last rank first, each block as
  // far as it can go before the next (a block runs ahead of its peers, as one may on the GPU: what it leaves them
  // — an exit, a stage refilled — shows).
  const bool ahead = cluster.front().options->schedule == EmuSchedule::Reverse;
  const auto resolve = [&](Block& b) {
    t_block = t_fiber = &b;
    bool released = resolve_warps(b);
    if (!b.error.empty()) throw EmulationError(b.error);
    return released || resolve_barrier(b, false);
  };
  for (;;) {
    bool ran = false, released = false;
    if (ahead) {
      for (unsigned r = static_cast<unsigned>(cluster.size()); r-- > 0;)
        for (bool moved = true; moved;) {
          moved = run_threads(cluster[r], stacks, r * n, order);
          moved = resolve(cluster[r]) || moved;
          ran = ran || moved;
        }
    } else {
      for (unsigned r = 0; r < cluster.size(); ++r) ran = run_threads(cluster[r], stacks, r * n, order) || ran;
    }
    if (std::all_of(cluster.begin(), cluster.end(), [](const Block& b) { return b.exited(); })) break;
    if (!ahead) {
      for (Block& b : cluster) {
        t_block = t_fiber = &b;
        released = resolve_warps(b) || released;
        if (!b.error.empty()) throw EmulationError(b.error);
      }
      if (!released)
        for (Block& b : cluster) {
          t_block = t_fiber = &b;
          released = resolve_barrier(b, false) || released;
        }
    }
    if (!released && cluster.size() > 1) released = resolve_cluster_barrier(cluster);
    if (released || ran) continue;
    // Nothing can move: each block still running says what its threads wait on (with clusters, maybe a peer).
    std::vector<std::string> reports;
    for (Block& b : cluster) {
      if (b.exited()) continue;
      t_block = t_fiber = &b;
      try {
        resolve_barrier(b, true);
        reports.push_back(fmt::format("kernel {}: {} made no progress", b.launch->kernel, block_name(b)));
      } catch (const EmulationError& e) {
        reports.emplace_back(e.what());
      }
    }
    throw EmulationError(fmt::format("{}", fmt::join(reports, "; and ")));
  }
  for (Block& b : cluster) {
    t_block = t_fiber = &b;
    count_accesses(b);
    for (unsigned i = 0; i < kRedZone; ++i)
      if (b.arena[i] != static_cast<char>(0xa5) ||
          b.arena[kRedZone + b.launch->shared_bytes + i] != static_cast<char>(0xa5))
        throw EmulationError(
            fmt::format("kernel {}: {}: the shared-memory red zone was overwritten", b.launch->kernel, block_name(b)));
  }
}

std::mutex g_modules_mutex;
std::mutex g_profile_mutex;

void add_counters(EmuAccessCounters& to, const EmuAccessCounters& from) {
  to.requests += from.requests, to.transactions += from.transactions, to.ideal += from.ideal;
}
void add_profile(EmuProfile& to, const EmuProfile& from) {
  for (auto member :
       {&EmuProfile::shared_load, &EmuProfile::shared_store, &EmuProfile::ldmatrix, &EmuProfile::cp_async_shared,
        &EmuProfile::global_load, &EmuProfile::global_store, &EmuProfile::cp_async_global})
    add_counters(to.*member, from.*member);
}
}  // namespace emulator

using namespace emulator;

std::shared_ptr<const EmuModule> EmuModule::compile(const std::string& source, const std::string& name) {
  const HostKernelLibrary library = compile_host_kernel(source, name);
  auto* slot = static_cast<tessera_emu::Api**>(dlsym(library.handle, "tessera_emu_api"));
  if (!slot) throw Error("emulator: " + library.path + " lacks tessera_emu_api (not built with the emulation prelude)");
  {
    std::lock_guard lock(g_modules_mutex);
    *slot = &g_api;
  }
  auto module = std::shared_ptr<EmuModule>(new EmuModule());
  module->handle_ = library.handle;
  module->path_ = library.path;
  module->compile_ms_ = library.compile_ms;
  return module;
}

void EmuModule::launch(const EmuLaunch& launch, const EmuOptions& options) const {
  if (launch.block == 0 || launch.block % 32 || launch.block > 1024)
    throw InvalidArgument("block", fmt::format("{} threads: must be a multiple of 32 up to 1024", launch.block));
  const auto entry = reinterpret_cast<Entry>(dlsym(handle_, (launch.kernel + kEmulatorEntrySuffix).c_str()));
  if (!entry) throw InvalidArgument("kernel", "no kernel named " + launch.kernel + " in " + path_);
  // A kernel declared with __cluster_dims__ runs in clusters of consecutive blocks along x, as the driver launches
  // it: the grid must hold whole clusters.
  unsigned cluster = 1;
  if (const auto* dims =
          static_cast<const unsigned*>(dlsym(handle_, (launch.kernel + kEmulatorClusterSuffix).c_str()))) {
    if (dims[1] != 1 || dims[2] != 1 || dims[0] == 0 || dims[0] > 8)
      throw InvalidArgument("kernel", fmt::format("{}: cluster dims ({}, {}, {}): the emulator runs clusters of 1 to 8 "
                                                  "blocks along x",
                                                  launch.kernel, dims[0], dims[1], dims[2]));
    cluster = dims[0];
  }
  if (launch.grid_x % cluster)
    throw InvalidArgument(
        "grid", fmt::format("grid x of {} is not a whole number of clusters of {} blocks", launch.grid_x, cluster));
  const std::uint64_t blocks = std::uint64_t{launch.grid_x} * launch.grid_y * launch.grid_z;
  if (blocks == 0) return;
  const std::uint64_t clusters = blocks / cluster;
  unsigned workers = options.workers > 0 ? static_cast<unsigned>(options.workers) : std::thread::hardware_concurrency();
  workers = static_cast<unsigned>(std::clamp<std::uint64_t>(clusters, 1, std::max(1u, workers)));
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex error_mutex;
  std::exception_ptr first_error;
  GridWorkers grid_workers;
  grid_workers.running = static_cast<int>(workers);
  const auto work = [&](unsigned worker) {
    // Leaves the running workers when it takes no more blocks, however it leaves.
    struct Leave {
      GridWorkers& workers;
      ~Leave() { --workers.running; }
    } leave{grid_workers};
    try {
      const Stacks stacks(launch.block * cluster);
      HappensBefore hb;
      std::vector<Block> blocks_of_cluster(cluster);
      for (unsigned r = 0; r < cluster; ++r) {
        Block& b = blocks_of_cluster[r];
        b.launch = &launch;
        b.cluster = &blocks_of_cluster;
        b.rank = r;
        b.agent_base = static_cast<int>(r * (launch.block + kMaxMBarriers));
        b.hb = &hb;
        b.workers = &grid_workers;
        b.options = &options;
        b.entry = entry;
        b.arena.resize(launch.shared_bytes + 2 * kRedZone);
        b.shadow.resize((launch.shared_bytes + 3) / 4 + 1);
        b.in_flight.resize((launch.shared_bytes + 3) / 4 + 1);
        b.mbarrier_word.resize((launch.shared_bytes + 3) / 4 + 2);
        b.wgmma_pins.resize((launch.shared_bytes + 3) / 4 + 1);
        b.store_pins.resize((launch.shared_bytes + 3) / 4 + 1);
        b.rng.seed(options.seed * 0x9e3779b97f4a7c15ULL + worker * 8 + r);
      }
      for (std::uint64_t id = next++; id < clusters && !stop; id = next++) {
        // Reverse schedules also walk the grid backwards.
        const std::uint64_t first = (options.schedule == EmuSchedule::Reverse ? clusters - 1 - id : id) * cluster;
        for (unsigned r = 0; r < cluster; ++r) {
          const std::uint64_t linear = first + r;
          blocks_of_cluster[r].block_idx = {
              static_cast<unsigned>(linear % launch.grid_x),
              static_cast<unsigned>(linear / launch.grid_x % launch.grid_y),
              static_cast<unsigned>(linear / (std::uint64_t{launch.grid_x} * launch.grid_y))};
        }
        run_cluster(blocks_of_cluster, hb, stacks);
      }
      if (options.profile) {
        std::lock_guard lock(g_profile_mutex);
        for (const Block& b : blocks_of_cluster) add_profile(*options.profile, b.profile);
      }
      t_block = t_fiber = nullptr;
    } catch (...) {
      t_block = t_fiber = nullptr;
      stop = true;
      std::lock_guard lock(error_mutex);
      if (!first_error) first_error = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  std::mutex threads_mutex;
  constexpr int kMostWorkers = 1024;
  grid_workers.add_worker = [&] {
    std::lock_guard lock(threads_mutex);
    if (grid_workers.waiting.load() < grid_workers.running.load()) return true;  // another waiter added one
    if (stop || next.load() >= clusters || threads.size() + 1 >= kMostWorkers) return false;
    ++grid_workers.running;
    threads.emplace_back(work, static_cast<unsigned>(threads.size() + 1));
    return true;
  };
  {
    std::lock_guard lock(threads_mutex);
    for (unsigned w = 1; w < workers; ++w) threads.emplace_back(work, w);
  }
  work(0);
  // Workers added while joining are joined too.
  for (std::size_t i = 0;; ++i) {
    std::thread t;
    {
      std::lock_guard lock(threads_mutex);
      if (i >= threads.size()) break;
      t = std::move(threads[i]);
    }
    t.join();
  }
  if (first_error) std::rethrow_exception(first_error);
  if (options.profile) {
    std::lock_guard lock(g_profile_mutex);
    ++options.profile->launches;
  }
}

}  // namespace tessera
