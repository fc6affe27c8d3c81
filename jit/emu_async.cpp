// The sm_90 asynchronous instructions in the SIMT emulator: mbarriers (phases, parities, transaction bytes), TMA
// loads (tiled boxes, swizzle, zeros outside the tensor) and warpgroup MMAs (shared-memory descriptors, results that
// land at wgmma_wait), each with the checks that catch a pipeline's bugs.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "generator/core/dtype.hpp"
#include "jit/emu_block.hpp"

namespace tessera {
namespace emulator {

// --- mbarriers and TMA (sm_90) ---

// The mbarrier at `offset` of t_block, as agent `viewer` uses it (the running thread, maybe of another block).
MBarrier& mbarrier_at(unsigned offset, const char* what, int viewer) {
  Block& b = *t_block;
  const std::string where = &b == t_fiber ? "" : " of " + block_name(b);
  for (MBarrier& m : b.mbarriers)
    if (m.offset == offset) {
      if (!b.hb->ordered(m.initialised_by, m.init_stamp, viewer))
        fail(fmt::format(
            "{} the mbarrier at offset {}{} before its initialisation by {} is visible to it "
            "(a __syncthreads{} after mbarrier.init?)",
            what, offset, where, agent_name(*t_fiber, m.initialised_by), where.empty() ? "" : " or cluster barrier"));
      return m;
    }
  fail(fmt::format("{} shared offset {}{}, where no mbarrier was initialised", what, offset, where));
}
MBarrier& mbarrier_at(unsigned offset, const char* what) { return mbarrier_at(offset, what, t_block->agent()); }

// Completes the current phase once its arrivals and transaction bytes are all in: it publishes what they released,
// its parity flips, and its waiters run again.
void complete_phase_if_done(MBarrier& m) {
  if (m.pending > 0 || m.tx != 0) return;
  Block& b = *t_block;
  m.completed[m.phase] = m.arrived;
  std::fill(m.arrived.begin(), m.arrived.end(), 0);
  m.phase ^= 1u;
  m.pending = m.expected;
  for (Thread& t : b.threads)
    if (t.state == State::MBarrier && t.wait_offset == m.offset) t.state = State::Runnable;
}

void api_mbarrier_init(unsigned offset, unsigned count) {
  Block& b = *t_block;
  if (offset % 8) fail(fmt::format("mbarrier.init at shared offset {}, which is not 8-byte aligned", offset));
  check_shared(offset, 8, "mbarrier.init");
  if (count == 0 || count >= (1u << 20)) fail(fmt::format("mbarrier.init with count {} (must be 1..2^20-1)", count));
  for (const MBarrier& m : b.mbarriers)
    if (m.offset == offset) fail(fmt::format("initialises the mbarrier at offset {} a second time", offset));
  if (b.mbarriers.size() == static_cast<std::size_t>(kMaxMBarriers))
    fail(fmt::format("more than {} mbarriers in one block", kMaxMBarriers));
  check_not_mbarrier(offset, 8, "mbarrier.init over");
  track(b.current, offset, 8, true);  // racing with plain accesses to these bytes is still a race
  MBarrier m;
  m.offset = offset;
  m.expected = m.pending = static_cast<int>(count);
  m.initialised_by = b.agent();
  m.init_stamp = b.hb->clock(b.agent());
  m.arrived.assign(static_cast<std::size_t>(b.hb->agents()), 0);
  b.mbarriers.push_back(std::move(m));
  b.mbarrier_word[offset / 4] = b.mbarrier_word[offset / 4 + 1] = 1;
}

void arrive_on(unsigned offset, unsigned tx_bytes, int viewer) {
  Block& b = *t_block;
  MBarrier& m = mbarrier_at(offset, "arrives on", viewer);
  if (m.pending == 0)
    fail(fmt::format("arrives on the mbarrier at offset {}{} more often than its count {} in one phase", offset,
                     &b == t_fiber ? "" : " of " + block_name(b), m.expected));
  m.tx += tx_bytes;
  b.hb->release(viewer, m.arrived);
  --m.pending;
  complete_phase_if_done(m);
}

void api_mbarrier_arrive(unsigned offset, unsigned tx_bytes) { arrive_on(offset, tx_bytes, t_block->agent()); }

void api_mbarrier_expect_tx(unsigned offset, unsigned tx_bytes) {
  mbarrier_at(offset, "expects bytes on").tx += tx_bytes;
}

// The phase of `parity` has completed when the barrier's current phase has the other parity.
int api_mbarrier_try_wait(unsigned offset, unsigned parity) {
  Block& b = *t_block;
  MBarrier& m = mbarrier_at(offset, "waits on");
  if ((parity & 1u) != m.phase) {
    b.hb->acquire(b.agent(), m.completed[parity & 1u]);
    return 1;
  }
  // Not yet: on the GPU the wait gives up after a while; here the thread sleeps until the next phase completes, so
  // a loop of try_waits is not a busy loop and a phase that never completes is a deadlock the scheduler reports.
  Thread& t = b.me();
  t.state = State::MBarrier;
  t.wait_offset = offset;
  yield();
  return 0;
}

void api_mbarrier_wait(unsigned offset, unsigned parity) {
  while (!api_mbarrier_try_wait(offset, parity)) {
  }
}

// The 16-byte chunk of a byte offset within a swizzle span moves by the 128-byte row's index (CUTLASS's Swizzle<3,4,3>
// for 128 bytes, <2,4,3> for 64, <1,4,3> for 32): TMA writes and wgmma reads shared tiles in this pattern.
unsigned swizzled(unsigned offset, unsigned swizzle_bytes) {
  if (swizzle_bytes == 0) return offset;
  const unsigned mask = swizzle_bytes / 16 - 1;
  return offset ^ (((offset >> 7) & mask) << 4);
}

// The box lands now, at the issue (the copy engine may deliver it at any time before the phase completes): a
// consumer that reads it without waiting is caught by the race check against the TMA unit's writes, which are
// ordered after what the issuing thread has seen (a stage overwritten before its readers released it is a race too).
// A TMA descriptor's tensor map as the emulator encodes it, with its box (1 beyond the rank) and the box's bytes;
// `what` ("load", "store") names the copy in the errors. The shared side of a swizzled box must be 1024-byte aligned,
// of another 128.
struct TmaBox {
  tessera_emu::TensorMapData t;
  unsigned box[3] = {1, 1, 1};
  unsigned bytes = 0;
};

TmaBox tma_box(const void* map, unsigned shared, const char* what) {
  TmaBox b;
  std::memcpy(&b.t, map, sizeof b.t);
  if (b.t.magic != tessera_emu::kTensorMapMagic)
    fail(fmt::format("TMA {} through {}, which holds no tensor map (not encoded for the emulator?)", what, map));
  for (unsigned d = 0; d < b.t.rank; ++d) b.box[d] = b.t.box[d];
  b.bytes = b.box[0] * b.t.element_bytes * b.box[1] * b.box[2];
  const unsigned align = b.t.swizzle_bytes ? 1024 : 128;
  if (shared % align)
    fail(fmt::format("TMA {} at shared offset {}, which is not {}-byte aligned{}", what, shared, align,
                     b.t.swizzle_bytes ? " (a swizzled box)" : ""));
  return b;
}

// fn(the element's swizzled byte offset within the box, its global address or null outside the tensor), for every
// element of the box at `coords`.
template <class Fn>
void for_each_box_element(const TmaBox& b, const int* coords, Fn fn) {
  auto* global = static_cast<char*>(const_cast<void*>(b.t.global));
  for (unsigned z = 0; z < b.box[2]; ++z)
    for (unsigned y = 0; y < b.box[1]; ++y)
      for (unsigned x = 0; x < b.box[0]; ++x) {
        const std::int64_t g[3] = {std::int64_t{coords[0]} + x, std::int64_t{coords[1]} + y,
                                   std::int64_t{coords[2]} + z};
        bool inside = true;
        std::int64_t at = 0;
        for (unsigned d = 0; d < b.t.rank; ++d) {
          inside = inside && g[d] >= 0 && static_cast<std::uint64_t>(g[d]) < b.t.dims[d];
          at += d == 0 ? g[0] * b.t.element_bytes : g[d] * static_cast<std::int64_t>(b.t.strides[d - 1]);
        }
        const unsigned linear = ((z * b.box[1] + y) * b.box[0] + x) * b.t.element_bytes;
        fn(swizzled(linear, b.t.swizzle_bytes), inside ? global + at : nullptr);
      }
}

// A box into t_block's shared memory on behalf of agent `viewer` (the issuing thread, maybe of another block), its
// bytes completing on t_block's mbarrier at offset `mbarrier`, written by that mbarrier's unit.
void load_box(unsigned dst, const void* map, const int* coords, unsigned mbarrier, int viewer) {
  Block& b = *t_block;
  const TmaBox box = tma_box(map, dst, "load");
  MBarrier& m = mbarrier_at(mbarrier, "completes a TMA load on", viewer);
  check_shared(dst, box.bytes, "TMA write");
  check_in_flight(dst, box.bytes, "TMA writes");
  check_not_mbarrier(dst, box.bytes, "TMA writes");
  check_not_pinned(dst, box.bytes, "a TMA load writes");
  check_async_visible(dst, box.bytes, "a TMA load writes");
  const int unit = b.unit(static_cast<int>(&m - b.mbarriers.data()));
  track_as(viewer, unit, dst, box.bytes, true);
  const unsigned element = box.t.element_bytes;
  for_each_box_element(box, coords, [&](unsigned offset, const char* global) {
    if (global) {
      check_global(global, element, "TMA read");
      std::memcpy(b.shared() + dst + offset, global, element);
    } else {
      std::memset(b.shared() + dst + offset, 0, element);  // outside the tensor: zeros
    }
  });
  m.tx -= box.bytes;
  b.hb->release(unit, m.arrived);
  complete_phase_if_done(m);
}

void api_tma_load(unsigned dst, const void* map, const int* coords, unsigned mbarrier) {
  load_box(dst, map, coords, mbarrier, t_block->agent());
}

// A TMA store is carried out at the issue: the box read from shared memory as the issuing thread sees it (other
// threads' writes to it must be ordered before the issue, or the race check reports them) and written to the tensor
// within its bounds. Its source stays pinned against writes until the thread's tma_store_wait retires its group.
void api_tma_store(const void* map, unsigned src, const int* coords) {
  Block& b = *t_block;
  const TmaBox box = tma_box(map, src, "store");
  check_shared(src, box.bytes, "TMA store read");
  check_in_flight(src, box.bytes, "TMA store reads");
  check_async_visible(src, box.bytes, "a TMA store reads");
  track(b.current, src, box.bytes, false);
  const unsigned element = box.t.element_bytes;
  for_each_box_element(box, coords, [&](unsigned offset, char* global) {
    if (!global) return;  // outside the tensor: not written
    check_global(global, element, "TMA write");
    std::memcpy(global, b.shared() + src + offset, element);
  });
  for (unsigned w = src / 4; w < (src + box.bytes + 3) / 4; ++w) ++b.store_pins[w];
  ++b.stores_in_flight;
  b.me().store_open.push_back({src, box.bytes});
}

void api_tma_store_commit() {
  Thread& t = t_block->me();
  t.store_groups.push_back(std::move(t.store_open));
  t.store_open.clear();
}

// Waits for every committed group of this thread's TMA stores: their sources may be written again.
void api_tma_store_wait() {
  Block& b = *t_block;
  Thread& t = b.me();
  for (const auto& group : t.store_groups)
    for (const auto& [src, bytes] : group) {
      for (unsigned w = src / 4; w < (src + bytes + 3) / 4; ++w) --b.store_pins[w];
      --b.stores_in_flight;
    }
  t.store_groups.clear();
}

void api_wgmma(int kind, int n, float* d, unsigned long long a, unsigned long long b, int accumulate, int transpose) {
  Thread& t = t_block->me();
  t.kind = kind, t.count = n, t.d = d, t.desc_a = a, t.desc_b = b, t.arg = accumulate, t.transpose = transpose;
  t.mask = 0xffffffffu;
  wait_in_warp(WarpOp::Wgmma);
}

// Bit 2 of a thread's `transpose` marks A as read from its registers (t.a) rather than through a descriptor.
constexpr int kWgmmaRegisterA = 4;

void api_wgmma_registers(int kind, int n, float* d, const unsigned* a, unsigned long long b, int accumulate,
                         int transpose) {
  if (kind == tessera_emu::kMmaTf32) fail("wgmma with A from registers takes 16-bit inputs, not tf32");
  Thread& t = t_block->me();
  t.kind = kind, t.count = n, t.d = d, t.desc_a = 0, t.desc_b = b, t.arg = accumulate;
  t.transpose = (transpose & 2) | kWgmmaRegisterA;
  t.a = a;
  t.mask = 0xffffffffu;
  wait_in_warp(WarpOp::Wgmma);
}

void api_wgmma_commit() {
  Thread& t = t_block->me();
  t.wgmma_groups.push_back(std::move(t.wgmma_open));
  t.wgmma_open.clear();
}

// Groups retire oldest first: this thread's accumulators take their values, and the tiles they read are released.
void api_wgmma_wait(int pending) {
  Block& b = *t_block;
  Thread& t = b.me();
  while (static_cast<int>(t.wgmma_groups.size()) > std::max(pending, 0)) {
    for (WgmmaResult& r : t.wgmma_groups.front()) {
      std::memcpy(r.d, r.values.data(), r.values.size() * sizeof(float));
      if (!r.op->retired) {
        r.op->retired = true;
        --b.wgmma_in_flight;
        for (unsigned w : r.op->words) --b.wgmma_pins[w];
      }
      b.hb->acquire(b.agent(), r.op->read);  // the MMA is complete for the whole warpgroup, its reads included
    }
    t.wgmma_groups.erase(t.wgmma_groups.begin());
  }
}

// The byte offset of element (row, k) of a 16-bit tile a wgmma descriptor describes (PTX ISA, "Matrix Descriptor
// Format"; CUTLASS's canonical GMMA layouts). K-major: without swizzle, 8x16-byte core matrices SBO apart along the
// rows and LBO apart along K; swizzled, 8-row groups SBO apart whose rows are 32, 64 or 128 bytes long, the 16-byte
// chunks XORed by the row within the span. M/N-major (`mn_major`): the same with the roles of the dimensions
// exchanged — swizzled, rows of the span along M (N) for each k, 8 of them (one per k) make an atom, k's groups of 8
// SBO apart and the span-wide slices of M (N) LBO apart; without swizzle, 8 contiguous M (N) elements per 16 bytes,
// 8 k rows of them a core matrix, cores SBO apart along M (N) and LBO apart along K.
unsigned wgmma_element(unsigned long long desc, int row, int k, bool mn_major, unsigned elem) {
  const unsigned start = static_cast<unsigned>(desc & 0x3fffu) << 4;
  const unsigned leading = static_cast<unsigned>(desc >> 16 & 0x3fffu) << 4;
  const unsigned stride = static_cast<unsigned>(desc >> 32 & 0x3fffu) << 4;
  const unsigned mode = static_cast<unsigned>(desc >> 62);
  const unsigned r = static_cast<unsigned>(row), c = static_cast<unsigned>(k);
  const unsigned span = mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0;
  if (!mn_major) {
    const unsigned per_chunk = 16 / elem;  // K elements in a core matrix's 16-byte row
    if (mode == 0) return start + r / 8 * stride + r % 8 * 16 + c / per_chunk * leading + c % per_chunk * elem;
    return swizzled(start + r / 8 * stride + r % 8 * span + c * elem, span);
  }
  if (mode == 0) return start + r / 8 * stride + c / 8 * leading + c % 8 * 16 + r % 8 * 2;
  const unsigned per_row = span / 2;  // M (N) elements in one span-wide row
  return swizzled(start + r / per_row * leading + c / 8 * stride + c % 8 * span + r % per_row * 2, span);
}

// wgmma.mma_async m64nNk16 for warpgroup `group`: A (64x16) and B (Nx16, K-major) read from shared memory now,
// the product added to each thread's latest accumulators (those of its MMAs still in flight, else its registers)
// and held until the thread retires the group.
void run_wgmma(Block& b, int group) {
  Thread* lanes = &b.threads[static_cast<std::size_t>(group * 128)];
  const Thread& first = lanes[0];
  const int n = first.count;
  for (int i = 0; i < 128; ++i)
    if (lanes[i].kind != first.kind || lanes[i].count != n || lanes[i].desc_a != first.desc_a ||
        lanes[i].desc_b != first.desc_b || lanes[i].arg != first.arg || lanes[i].transpose != first.transpose)
      throw EmulationError(fmt::format("kernel {}: {}: wgmma operands differ within warpgroup {}", b.launch->kernel,
                                       thread_name(b, group * 128 + i), group));
  const int provider = group * 128;
  auto op = std::make_shared<WgmmaOp>();
  // tf32: 4-byte elements, 8 of K per instruction, the low 13 mantissa bits ignored.
  const bool tf32 = first.kind == tessera_emu::kMmaTf32;
  const unsigned elem = tf32 ? 4 : 2;
  const int depth = tf32 ? 8 : 16;
  const auto load = [&](unsigned long long desc, int row, int k, bool mn_major) {
    const unsigned at = wgmma_element(desc, row, k, mn_major, elem);
    std::uint32_t bits = 0;
    read_shared_for(b, provider, at, elem, &bits);
    op->words.push_back(at / 4);
    if (tf32) return __builtin_bit_cast(float, bits & 0xffffe000u);
    const auto half = static_cast<std::uint16_t>(bits);
    return first.kind == tessera_emu::kMmaBf16 ? from_bf16(half) : from_f16(half);
  };
  b.collective = true;
  std::vector<float> A(64 * 16), B(static_cast<std::size_t>(n) * 16);
  if (first.transpose & kWgmmaRegisterA) {
    // Each lane's fragment of its warp's 16 rows: register e holds (g + 8·(e & 1), 2t + 8·(e >> 1)) and the next k.
    const auto element = [&](std::uint16_t half) {
      return first.kind == tessera_emu::kMmaBf16 ? from_bf16(half) : from_f16(half);
    };
    for (int i = 0; i < 128; ++i)
      for (int e = 0; e < 4; ++e) {
        const unsigned word = lanes[i].a[e];
        const int row = 16 * (i / 32) + i % 32 / 4 + 8 * (e & 1), k = 2 * (i % 4) + 8 * (e >> 1);
        A[static_cast<std::size_t>(row * 16 + k)] = element(static_cast<std::uint16_t>(word));
        A[static_cast<std::size_t>(row * 16 + k + 1)] = element(static_cast<std::uint16_t>(word >> 16));
      }
  } else {
    for (int r = 0; r < 64; ++r)
      for (int k = 0; k < depth; ++k)
        A[static_cast<std::size_t>(r * 16 + k)] = load(first.desc_a, r, k, first.transpose & 1);
  }
  for (int c = 0; c < n; ++c)
    for (int k = 0; k < depth; ++k)
      B[static_cast<std::size_t>(c * 16 + k)] = load(first.desc_b, c, k, (first.transpose & 2) != 0);
  b.collective = false;
  if (!b.error.empty()) return;
  b.hb->release(b.agent(provider), op->read);
  std::sort(op->words.begin(), op->words.end());
  op->words.erase(std::unique(op->words.begin(), op->words.end()), op->words.end());
  for (unsigned w : op->words) ++b.wgmma_pins[w];
  ++b.wgmma_in_flight;
  for (int i = 0; i < 128; ++i) {
    Thread& t = lanes[i];
    const int warp = i / 32, g = i % 32 / 4, q = i % 4;
    // The thread's accumulators as its last MMA in flight leaves them, or as its registers hold them.
    std::vector<float> values(t.d, t.d + n / 2);
    const auto latest = [&](const std::vector<WgmmaResult>& results) {
      for (auto r = results.rbegin(); r != results.rend(); ++r)
        if (r->d == t.d) return &r->values;
      return static_cast<const std::vector<float>*>(nullptr);
    };
    const std::vector<float>* pending = latest(t.wgmma_open);
    for (auto g2 = t.wgmma_groups.rbegin(); !pending && g2 != t.wgmma_groups.rend(); ++g2) pending = latest(*g2);
    if (pending) values = *pending;
    for (int j = 0; j < n / 8; ++j)
      for (int e = 0; e < 4; ++e) {
        const int row = 16 * warp + g + (e >= 2 ? 8 : 0), col = 8 * j + 2 * q + (e & 1);
        float sum = 0;
        for (int k = 0; k < 16; ++k)
          sum = std::fma(A[static_cast<std::size_t>(row * 16 + k)], B[static_cast<std::size_t>(col * 16 + k)], sum);
        float& v = values[static_cast<std::size_t>(4 * j + e)];
        v = first.arg ? v + sum : sum;
      }
    t.wgmma_open.push_back({t.d, std::move(values), op});
  }
}

}  // namespace emulator

std::array<std::byte, 128> emulated_tma_descriptor(const TmaTensor& t) {
  const std::size_t rank = t.dims.size();
  if (rank < 1 || rank > 3) throw InvalidArgument("dims", fmt::format("rank {}: the emulator takes 1 to 3", rank));
  if (t.box.size() != rank || t.stride_bytes.size() != rank - 1)
    throw InvalidArgument(
        "box", fmt::format("{} box extents and {} strides for rank {}", t.box.size(), t.stride_bytes.size(), rank));
  if (t.element_bytes != 1 && t.element_bytes != 2 && t.element_bytes != 4 && t.element_bytes != 8)
    throw InvalidArgument("element_bytes", fmt::format("{}: must be 1, 2, 4 or 8", t.element_bytes));
  if (reinterpret_cast<std::uintptr_t>(t.global) % 16) throw InvalidArgument("global", "must be 16-byte aligned");
  for (std::size_t d = 0; d < rank; ++d) {
    if (t.dims[d] == 0 || t.dims[d] > (std::uint64_t{1} << 32))
      throw InvalidArgument("dims", fmt::format("dims[{}] = {}: must be in 1..2^32", d, t.dims[d]));
    if (t.box[d] == 0 || t.box[d] > 256)
      throw InvalidArgument("box", fmt::format("box[{}] = {}: must be in 1..256", d, t.box[d]));
  }
  for (std::size_t d = 0; d + 1 < rank; ++d)
    if (t.stride_bytes[d] % 16 || t.stride_bytes[d] >= (std::uint64_t{1} << 40))
      throw InvalidArgument("stride_bytes",
                            fmt::format("stride_bytes[{}] = {}: a multiple of 16 below 2^40", d, t.stride_bytes[d]));
  const unsigned inner = t.box[0] * t.element_bytes;
  if (inner % 16) throw InvalidArgument("box", fmt::format("the inner box is {} bytes, not a multiple of 16", inner));
  if (t.swizzle_bytes != 0 && t.swizzle_bytes != 32 && t.swizzle_bytes != 64 && t.swizzle_bytes != 128)
    throw InvalidArgument("swizzle_bytes", fmt::format("{}: must be 0, 32, 64 or 128", t.swizzle_bytes));
  if (t.swizzle_bytes && inner > t.swizzle_bytes)
    throw InvalidArgument(
        "box", fmt::format("the inner box is {} bytes, more than the {}-byte swizzle span", inner, t.swizzle_bytes));
  tessera_emu::TensorMapData data{};
  data.magic = tessera_emu::kTensorMapMagic;
  data.global = t.global;
  data.rank = static_cast<unsigned>(rank);
  data.element_bytes = t.element_bytes;
  data.swizzle_bytes = t.swizzle_bytes;
  for (std::size_t d = 0; d < rank; ++d) data.dims[d] = t.dims[d], data.box[d] = t.box[d];
  for (std::size_t d = 0; d + 1 < rank; ++d) data.strides[d] = t.stride_bytes[d];
  static_assert(sizeof data <= 128);
  std::array<std::byte, 128> bytes{};
  std::memcpy(bytes.data(), &data, sizeof data);
  return bytes;
}

}  // namespace tessera
