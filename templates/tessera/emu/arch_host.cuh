// Host bodies of the arch wrappers (tessera/arch/*.cuh), for kernels built for the SIMT emulator: every memory access,
// copy and warp collective goes to the emulator, which checks it and carries it out.
#pragma once

#include "tessera/arch/tma_descriptor.cuh"
#include "tessera/emu/api.cuh"
#include "tessera/numeric.cuh"
#include "tessera/platform.cuh"

namespace tessera {

inline void keep_computed(int&) {}

template <class T>
inline T ld_shared(u32 offset) {
  T value;
  tessera_emu_api->shared_load(offset, sizeof(T), &value);
  return value;
}
template <class T>
inline void st_shared(u32 offset, const T& value) {
  tessera_emu_api->shared_store(offset, sizeof(T), &value);
}
template <class T>
inline T ld_global(const T* address) {
  T value;
  tessera_emu_api->global_load(address, sizeof(T), &value);
  return value;
}
template <class T>
inline void st_global(T* address, const T& value) {
  tessera_emu_api->global_store(address, sizeof(T), &value);
}

inline void cp_async_16(u32 dst, const void* src, int src_bytes) {
  tessera_emu_api->cp_async(dst, src, 16, static_cast<unsigned>(src_bytes));
}
inline void cp_async_8(u32 dst, const void* src, int src_bytes) {
  tessera_emu_api->cp_async(dst, src, 8, static_cast<unsigned>(src_bytes));
}
inline void cp_async_4(u32 dst, const void* src, int src_bytes) {
  tessera_emu_api->cp_async(dst, src, 4, static_cast<unsigned>(src_bytes));
}
inline void cp_async_commit() { tessera_emu_api->cp_async_commit(); }
template <int N>
inline void cp_async_wait() {
  tessera_emu_api->cp_async_wait(N);
}

inline void ldmatrix_x1(u32 (&r)[1], u32 offset) { tessera_emu_api->ldmatrix(r, 1, 0, offset); }
inline void ldmatrix_x2(u32 (&r)[2], u32 offset) { tessera_emu_api->ldmatrix(r, 2, 0, offset); }
inline void ldmatrix_x4(u32 (&r)[4], u32 offset) { tessera_emu_api->ldmatrix(r, 4, 0, offset); }
inline void ldmatrix_x1_trans(u32 (&r)[1], u32 offset) { tessera_emu_api->ldmatrix(r, 1, 1, offset); }
inline void ldmatrix_x2_trans(u32 (&r)[2], u32 offset) { tessera_emu_api->ldmatrix(r, 2, 1, offset); }
inline void ldmatrix_x4_trans(u32 (&r)[4], u32 offset) { tessera_emu_api->ldmatrix(r, 4, 1, offset); }

inline void mma_m16n8k16_f16(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  tessera_emu_api->mma(tessera_emu::kMmaF16, d, a, b);
}
inline void mma_m16n8k16_bf16(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  tessera_emu_api->mma(tessera_emu::kMmaBf16, d, a, b);
}
inline void mma_m16n8k8_tf32(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  tessera_emu_api->mma(tessera_emu::kMmaTf32, d, a, b);
}

inline float shuffle_float(int kind, unsigned mask, float value, int arg) {
  return __builtin_bit_cast(float, tessera_emu_api->shuffle(kind, mask, __builtin_bit_cast(unsigned, value), arg));
}
inline float shfl_xor(unsigned mask, float value, int lane_mask) {
  return shuffle_float(tessera_emu::kShuffleXor, mask, value, lane_mask);
}
inline float shfl_down(unsigned mask, float value, unsigned delta) {
  return shuffle_float(tessera_emu::kShuffleDown, mask, value, static_cast<int>(delta));
}
inline float shfl_idx(unsigned mask, float value, int lane) {
  return shuffle_float(tessera_emu::kShuffleIdx, mask, value, lane);
}
inline void syncwarp(unsigned mask = 0xffffffffu) { tessera_emu_api->syncwarp(mask); }
inline bool vote_all(unsigned mask, bool predicate) {
  return tessera_emu_api->shuffle(tessera_emu::kVoteAll, mask, predicate, 0) != 0;
}
inline bool vote_any(unsigned mask, bool predicate) {
  return tessera_emu_api->shuffle(tessera_emu::kVoteAny, mask, predicate, 0) != 0;
}
inline unsigned ballot(unsigned mask, bool predicate) {
  return tessera_emu_api->shuffle(tessera_emu::kBallot, mask, predicate, 0);
}

// Flags between blocks: the emulator's workers run blocks in grid order, several at once, and report a wait that no
// running block can end.
inline void threadfence() {}
inline void flag_release_add(int* flag, int value) { tessera_emu_api->flag_add(flag, value); }
inline void flag_wait_at_least(const int* flag, int value) { tessera_emu_api->flag_wait(flag, value); }

inline void mbarrier_init(u32 offset, u32 count) { tessera_emu_api->mbarrier_init(offset, count); }
inline void fence_barrier_init() {}
inline void mbarrier_arrive(u32 offset) { tessera_emu_api->mbarrier_arrive(offset, 0); }
inline void mbarrier_arrive_expect_tx(u32 offset, u32 bytes) { tessera_emu_api->mbarrier_arrive(offset, bytes); }
inline void mbarrier_expect_tx(u32 offset, u32 bytes) { tessera_emu_api->mbarrier_expect_tx(offset, bytes); }
inline bool mbarrier_try_wait(u32 offset, u32 parity) {
  return tessera_emu_api->mbarrier_try_wait(offset, parity) != 0;
}
inline void mbarrier_wait(u32 offset, u32 parity) { tessera_emu_api->mbarrier_wait(offset, parity); }

inline void tma_load_2d(u32 dst, const TmaDescriptor* map, int x, int y, u32 mbarrier) {
  const int coords[3] = {x, y, 0};
  tessera_emu_api->tma_load(dst, map, coords, mbarrier);
}
inline void tma_load_3d(u32 dst, const TmaDescriptor* map, int x, int y, int z, u32 mbarrier) {
  const int coords[3] = {x, y, z};
  tessera_emu_api->tma_load(dst, map, coords, mbarrier);
}
inline void fence_proxy_async() { tessera_emu_api->fence_proxy_async(); }
inline void tma_store_3d(const TmaDescriptor* map, u32 src, int x, int y, int z) {
  const int coords[3] = {x, y, z};
  tessera_emu_api->tma_store(map, src, coords);
}
inline void tma_store_commit() { tessera_emu_api->tma_store_commit(); }
inline void tma_store_wait() { tessera_emu_api->tma_store_wait(); }

// The emulator's shared "addresses" are the offsets themselves.
enum WgmmaSwizzle : int { kWgmmaInterleave = 0, kWgmma128B = 1, kWgmma64B = 2, kWgmma32B = 3 };
inline unsigned long long wgmma_descriptor(u32 offset, u32 leading_bytes, u32 stride_bytes, int swizzle) {
  return static_cast<unsigned long long>((offset & 0x3ffffu) >> 4) |
         static_cast<unsigned long long>((leading_bytes & 0x3ffffu) >> 4) << 16 |
         static_cast<unsigned long long>((stride_bytes & 0x3ffffu) >> 4) << 32 |
         static_cast<unsigned long long>(swizzle & 3) << 62;
}
inline void wgmma_fence() {}
inline void named_barrier_sync(int id, int threads) { tessera_emu_api->named_barrier(id, threads, 1); }
inline void named_barrier_arrive(int id, int threads) { tessera_emu_api->named_barrier(id, threads, 0); }
// Register reallocation changes nothing the emulator models.
template <int kCount>
inline void setmaxnreg_dec() {}
template <int kCount>
inline void setmaxnreg_inc() {}
inline void wgmma_commit() { tessera_emu_api->wgmma_commit(); }
template <int N>
inline void wgmma_wait() {
  tessera_emu_api->wgmma_wait(N);
}
enum WgmmaInput : int { kWgmmaF16 = 0, kWgmmaBf16 = 1, kWgmmaTf32 = 2 };  // = tessera_emu::MmaKind
template <int kInput, int kN, int kTransA = 0, int kTransB = 0>
inline void wgmma(float (&d)[kN / 2], unsigned long long a, unsigned long long b, int accumulate) {
  static_assert(kN == 64 || kN == 128 || kN == 256, "wgmma: N is 64, 128 or 256");
  static_assert(kInput != kWgmmaTf32 || (kTransA == 0 && kTransB == 0), "wgmma: tf32 operands are K-major only");
  tessera_emu_api->wgmma(kInput, kN, d, a, b, accumulate, kTransA | kTransB << 1);
}
template <int kInput, int kN, int kTransB = 0>
inline void wgmma_rs(float (&d)[kN / 2], const u32 (&a)[4], unsigned long long b, int accumulate) {
  static_assert(kN == 64 || kN == 128 || kN == 256, "wgmma: N is 64, 128 or 256");
  static_assert(kInput != kWgmmaTf32, "wgmma_rs: 16-bit inputs only");
  tessera_emu_api->wgmma_registers(kInput, kN, d, a, b, accumulate, kTransB << 1);
}

inline u32 cluster_rank() { return tessera_emu_api->index()->cluster_rank; }
inline void cluster_sync() { tessera_emu_api->cluster_sync(__LINE__); }
inline void mbarrier_arrive_cluster(u32 offset, u32 rank) { tessera_emu_api->mbarrier_arrive_cluster(offset, rank); }
inline void tma_load_3d_multicast(u32 dst, const TmaDescriptor* map, int x, int y, int z, u32 mbarrier, u16 mask) {
  const int coords[3] = {x, y, z};
  tessera_emu_api->tma_load_multicast(dst, map, coords, mbarrier, mask);
}

inline half_t f32_to_f16(float x) { return half_t{tessera_emu_api->f32_to_f16(x)}; }
inline float f16_to_f32(half_t h) { return tessera_emu_api->f16_to_f32(h.bits); }
inline bfloat16_t f32_to_bf16(float x) { return bfloat16_t{tessera_emu_api->f32_to_bf16(x)}; }
inline float bf16_to_f32(bfloat16_t h) { return __builtin_bit_cast(float, static_cast<u32>(h.bits) << 16); }
inline u32 f32_to_tf32(u32 bits) { return tessera_emu_api->f32_to_tf32(bits); }

}  // namespace tessera
