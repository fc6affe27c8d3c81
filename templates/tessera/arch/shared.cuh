// Device bodies: shared and global memory accesses. Kernels address their dynamic shared memory by byte offset
// and touch global memory only through ld_global/st_global, so that the emulator's host bodies can bounds-check every
// access and find races between barriers; on the GPU these are plain loads and stores.
#pragma once

#include "tessera/platform.cuh"

// The dynamic shared memory of every tessera kernel (sized at launch), aligned to a 128-byte swizzle atom (8 rows of
// 128 bytes) so that TMA's and wgmma's swizzle patterns, which follow address bits, follow the offsets too.
extern __shared__ __align__(1024) char tessera_smem[];

namespace tessera {

// The 32-bit shared-window address of a shared-memory byte offset (what cp.async and ldmatrix take). The intrinsic,
// not inline assembly: the compiler sees one base for the whole kernel rather than a conversion per access.
TESSERA_DEVICE u32 shared_address(u32 offset) {
  return static_cast<u32>(__cvta_generic_to_shared(tessera_smem)) + offset;
}

// Keeps a value as computed: the compiler may not recompute it from its inputs where it is used, which it otherwise
// does inside hot loops to save a register (a lane's swizzled offsets, recomputed every k-tile).
TESSERA_DEVICE void keep_computed(int& value) { asm volatile("" : "+r"(value)); }

template <class T>
TESSERA_DEVICE T ld_shared(u32 offset) {
  return *reinterpret_cast<const T*>(tessera_smem + offset);
}
template <class T>
TESSERA_DEVICE void st_shared(u32 offset, const T& value) {
  *reinterpret_cast<T*>(tessera_smem + offset) = value;
}
template <class T>
TESSERA_DEVICE T ld_global(const T* address) {
  return *address;
}
template <class T>
TESSERA_DEVICE void st_global(T* address, const T& value) {
  *address = value;
}

}  // namespace tessera
