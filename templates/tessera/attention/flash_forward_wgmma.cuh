// FlashAttention's forward pass on Hopper (sm_90a), warp-specialised as FlashAttention-3: a producer warpgroup whose
// one thread streams Q once and K and V blocks with TMA into a Stages-deep ring of 128-byte-swizzled tiles (a `full`
// mbarrier each for K and V, so S can start before V lands, and an `empty` one per stage); Warps/4 consumer
// warpgroups of 64 query rows each. A consumer computes S = Q·Kᵀ with wgmma.mma_async from the shared tiles, runs
// the online softmax on the accumulators (the per-warp code the mma.sync kernel uses: wgmma's accumulators are
// mma.sync's C fragments, repeated per warp), and O += P·V with P from registers (wgmma's RS form: the softmax's
// output is the A operand as it stands) and V read N-major through the descriptor's transpose. FA3's schedules: block
// j's P·V overlaps the softmax of block j + 1; with two consumers, the producer hands them its registers (setmaxnreg)
// and they take turns on the tensor cores (ping-pong). Tiles are 64-column slabs of D (128-byte rows) for Q, K and V
// alike; the TMA box of each is 64 × its rows, zeros past the tensor. Grid as the mma.sync kernel's: x = query block +
// blocks × head, z = batch item; no key splits.
#pragma once

#include "tessera/arch.cuh"
#include "tessera/attention/attention_params.cuh"
#include "tessera/attention/online_softmax.cuh"
#include "tessera/element.cuh"

namespace tessera {

// T supplies: Element, kInput (f16 or bf16), D (64 or 128), BC (keys per block: 64 or 128), Warps (consumer warps: 4
// or 8, 16 query rows each), Stages, Causal, Mod (as the mma.sync kernel's).
template <class T>
struct WgmmaFlashShape {
  static constexpr int kBR = 16 * T::Warps;
  static constexpr int kConsumers = T::Warps / 4;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kSlabs = T::D / 64;           // 64-column slabs of a row: 128 bytes each
  static constexpr u32 kQBytes = kBR * T::D * 2;     // kSlabs slabs of kBR rows
  static constexpr u32 kKVBytes = T::BC * T::D * 2;  // one K or V tile: kSlabs slabs of BC rows
  static constexpr u32 kStageBytes = 2 * kKVBytes;   // K, then V
  static constexpr u32 kRing = kQBytes;              // the stages follow Q
  static constexpr u32 kBarriers = kRing + T::Stages * kStageBytes;
  // Two consumers (384 threads, 168 registers each at launch): the producer keeps 40, the consumers take 232 (the
  // 64K an SM has). One consumer needs no split: 256 threads have 255 each.
  static constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;
  // Barriers: Q's, then full K, full V and empty for each stage.
  static constexpr u32 kSharedBytes = kBarriers + 8 * (1 + 3 * T::Stages);
};

template <class T>
TESSERA_DEVICE u32 flash_barrier(int kind, int stage) {  // kind 0: full K, 1: full V, 2: empty
  return WgmmaFlashShape<T>::kBarriers + 8u * (1u + static_cast<u32>(kind * T::Stages + stage));
}

// One tile (kSlabs boxes of 64 columns × rows) by TMA at (row, plane) of its tensor map, completing on `full`.
template <class T, int kRows>
TESSERA_DEVICE void flash_load_tile(u32 tile, const TmaDescriptor* map, int row, int plane, u32 full) {
#pragma unroll
  for (int slab = 0; slab < WgmmaFlashShape<T>::kSlabs; ++slab)
    tma_load_3d(tile + static_cast<u32>(slab * kRows * 128), map, slab * 64, row, plane, full);
}

template <class T>
TESSERA_DEVICE void flash_forward_wgmma(const AttentionParams& p) {
  using S = WgmmaFlashShape<T>;
  constexpr int kBR = S::kBR, BC = T::BC;
  constexpr int kWgmmaIn = T::kInput == kInputBf16 ? kWgmmaBf16 : kWgmmaF16;
  const int tid = static_cast<int>(threadIdx.x), warpgroup = tid / 128;

  const FlashBlock f = flash_block<kBR, T::Causal>(p);  // no key splits: f.split is 0
  if (f.empty) return;
  const int h = f.h, b = f.b, kv_head = f.kv_head, seq_q = f.seq_q, q0 = f.q0, diagonal = f.diagonal, kv_end = f.kv_end;
  const int q_start = static_cast<int>(f.q_start), kv_start = static_cast<int>(f.kv_start);  // TMA coordinates
  const int blocks = (kv_end + BC - 1) / BC;

  constexpr u32 kQFull = S::kBarriers;
  if (tid == 0) {
    mbarrier_init(kQFull, 1);
    for (int s = 0; s < T::Stages; ++s) {
      mbarrier_init(flash_barrier<T>(0, s), 1);
      mbarrier_init(flash_barrier<T>(1, s), 1);
      mbarrier_init(flash_barrier<T>(2, s), 128 * S::kConsumers);
    }
    fence_barrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {
    // Producer: one thread issues every copy; a stage is refilled once every consumer thread has released it. Its
    // warpgroup hands registers to the consumers (FlashAttention-3's split).
    if constexpr (S::kConsumers == 2) setmaxnreg_dec<S::kProducerRegisters>();
    if (tid == 0) {
      mbarrier_arrive_expect_tx(kQFull, S::kQBytes);
      flash_load_tile<T, kBR>(0, &p.q_map, b * p.tma_rows[0] + q_start + q0, b * p.tma_planes[0] + h, kQFull);
      const int kv_row = b * p.tma_rows[1] + kv_start, k_plane = b * p.tma_planes[1] + kv_head;
      const int v_row = b * p.tma_rows[2] + kv_start, v_plane = b * p.tma_planes[2] + kv_head;
      for (int block = 0; block < blocks; ++block) {
        const int s = block % T::Stages;
        const u32 phase = static_cast<u32>(block / T::Stages) & 1u;
        mbarrier_wait(flash_barrier<T>(2, s), phase ^ 1u);  // a fresh barrier's parity-1 phase counts as complete
        const u32 tile = S::kRing + static_cast<u32>(s) * S::kStageBytes;
        mbarrier_arrive_expect_tx(flash_barrier<T>(0, s), S::kKVBytes);
        flash_load_tile<T, BC>(tile, &p.k_map, kv_row + block * BC, k_plane, flash_barrier<T>(0, s));
        mbarrier_arrive_expect_tx(flash_barrier<T>(1, s), S::kKVBytes);
        flash_load_tile<T, BC>(tile + S::kKVBytes, &p.v_map, v_row + block * BC, v_plane, flash_barrier<T>(1, s));
      }
    }
    return;
  }

  // Consumer warpgroup c: query rows q0 + 64c .. + 63; its warp w holds 16 of them.
  if constexpr (S::kConsumers == 2) setmaxnreg_inc<S::kConsumerRegisters>();
  const int c = warpgroup - 1, warp = (tid / 32) % 4, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const float kNegInf = negative_infinity();
  const u32 q_rows = static_cast<u32>(c * 64 * 128);  // this consumer's rows within each slab of Q
  float o[T::D / 2];
#pragma unroll
  for (int i = 0; i < T::D / 2; ++i) o[i] = 0.0f;
  auto& of = reinterpret_cast<float(&)[T::D / 8][4]>(o);
  RowState st{{kNegInf, kNegInf}, {0.0f, 0.0f}, {q0 + c * 64 + warp * 16 + g, q0 + c * 64 + warp * 16 + g + 8}};
  mbarrier_wait(kQFull, 0);

  // A block's stage, the barriers' phase for it, its K and V tiles.
  const auto stage = [](int block) { return block % T::Stages; };
  const auto phase = [](int block) { return static_cast<u32>(block / T::Stages) & 1u; };
  const auto k_tile = [](int block) { return S::kRing + static_cast<u32>(block % T::Stages) * S::kStageBytes; };
  // S = Q·Kᵀ of a block, issued (not waited for): both K-major (rows of D), 16 of D (32 bytes of a row) a step.
  float sa[BC / 2];
  auto& sf = reinterpret_cast<float(&)[BC / 8][4]>(sa);
  const auto issue_scores = [&](int block) {
    mbarrier_wait(flash_barrier<T>(0, stage(block)), phase(block));
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < T::D / 16; ++ks) {
      const u32 slab = static_cast<u32>(ks / 4), step = static_cast<u32>(ks % 4) * 32;
      wgmma<kWgmmaIn, BC>(sa, wgmma_descriptor(slab * kBR * 128 + q_rows + step, 16, 1024, kWgmma128B),
                          wgmma_descriptor(k_tile(block) + slab * BC * 128 + step, 16, 1024, kWgmma128B), ks > 0);
    }
    wgmma_commit();
  };
  // The softmax of the block's scores in sa: P into pa's k16 steps, the factor O must be rescaled by.
  const auto softmax = [&](int block, u32(&pa)[BC / 16][4], float(&rescale)[2]) {
    online_softmax<T>(sf, st, rescale, block * BC, kv_end, diagonal, h, b, p);
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) p_fragment<T::kInput>(sf, kk, pa[kk]);
  };

  // FlashAttention-3's overlap within a warpgroup: block j's O += P·V runs on the tensor cores while the softmax of
  // block j + 1's scores (issued just before it) runs on the other units. P·V takes P from registers (the RS form;
  // they stay untouched until it retires) and V N-major (64-column slabs LBO apart, 8-key groups 1024 bytes apart).
  // With two consumers, FlashAttention-3's ping-pong: they take turns issuing their MMAs (named barrier 1 + c is
  // consumer c's turn), so that one's softmax runs while the other's MMAs hold the tensor cores. Consumer 0 goes
  // first; the last hand-over that nobody would take is left out, so every round completes.
  const auto my_turn = [&] {
    if constexpr (S::kConsumers == 2) named_barrier_sync(1 + c, 256);
  };
  const auto hand_over = [&](bool last) {
    if constexpr (S::kConsumers == 2)
      if (!(last && c == 1)) named_barrier_arrive(2 - c, 256);
  };
  u32 p_cur[BC / 16][4], p_next[BC / 16][4];
  float rescale[2];
  if (blocks > 0) {
    if constexpr (S::kConsumers == 2)
      if (c == 1) named_barrier_arrive(1, 256);
    my_turn();
    issue_scores(0);
    hand_over(false);
    wgmma_wait<0>();
    softmax(0, p_cur, rescale);  // O is still zero: nothing to rescale
  }
  for (int block = 0; block < blocks; ++block) {
    const bool next = block + 1 < blocks;
    my_turn();
    if (next) issue_scores(block + 1);
    mbarrier_wait(flash_barrier<T>(1, stage(block)), phase(block));
    wgmma_fence();
    const u32 v_tile = k_tile(block) + S::kKVBytes;
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk)
      wgmma_rs<kWgmmaIn, T::D, 1>(o, p_cur[kk], wgmma_descriptor(v_tile + kk * 16 * 128, BC * 128, 1024, kWgmma128B),
                                  1);
    wgmma_commit();
    hand_over(!next);
    if (next) {
      wgmma_wait<1>();  // the next block's scores (the older group) have landed; P·V runs on
      softmax(block + 1, p_next, rescale);
    }
    wgmma_wait<0>();
    mbarrier_arrive(flash_barrier<T>(2, stage(block)));  // this block's K and V are no longer read
    if (next) {
      rescale_rows(of, rescale);  // O now holds block j's P·V, which the new max rescales too
#pragma unroll
      for (int kk = 0; kk < BC / 16; ++kk)
#pragma unroll
        for (int e = 0; e < 4; ++e) p_cur[kk][e] = p_next[kk][e];
    }
  }

  // O = accumulated / sum (0 for a row that saw no key), and the log-sum-exp. The rows go to this consumer's own rows
  // of the Q tile (its last reads of them retired with its last S), then out in 16-byte chunks of a row.
  float inverse[2], lse[2];
  finish_rows(st, inverse, lse);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int local = warp * 16 + g + 8 * r;  // within this consumer's 64 rows
#pragma unroll
    for (int i = 0; i < T::D / 8; ++i) {
      const u32 x = static_cast<u32>((i % 8) * 16 + 4 * t);  // byte within the slab's 128-byte row
      const u32 at = static_cast<u32>(i / 8) * kBR * 128 + q_rows + static_cast<u32>(local) * 128 +
                     (x ^ (static_cast<u32>(local % 8) << 4));
      st_shared<u32>(at, pack_pair<T::kInput>(of[i][2 * r] * inverse[r], of[i][2 * r + 1] * inverse[r]));
    }
    if (p.lse != nullptr && t == 0 && st.row[r] < seq_q)
      st_global(p.lse + b * p.lse_bs + h * p.lse_hs + q_start + st.row[r], lse[r]);
  }
  syncwarp();
  constexpr int kChunks = T::D / 8;  // 16-byte chunks of a row
  for (int e = lane; e < 16 * kChunks; e += 32) {
    const int local = warp * 16 + e / kChunks, chunk = e % kChunks;
    const int i = q0 + c * 64 + local;
    if (i >= seq_q) continue;
    const u32 at = static_cast<u32>(chunk / 8) * kBR * 128 + q_rows + static_cast<u32>(local) * 128 +
                   ((static_cast<u32>(chunk % 8) ^ static_cast<u32>(local % 8)) << 4);
    const Vector<u16, 8> v = ld_shared<Vector<u16, 8>>(at);
    u16* out = static_cast<u16*>(p.o) + b * p.o_bs + h * p.o_hs + (q_start + i) * p.o_ss + chunk * 8;
    st_global(reinterpret_cast<Vector<u16, 8>*>(out), v);
  }
}

}  // namespace tessera
