// The table of functions through which emulated kernels reach the SIMT emulator (jit/simt_emulator.cpp). The
// kernel's host build and the emulator both include this header, so the two sides agree on it by construction.
#pragma once

namespace tessera_emu {

struct Dim3 {
  unsigned x, y, z;
};

struct ThreadIndex {
  Dim3 thread_idx, block_idx, block_dim, grid_dim;
};

enum MmaKind { kMmaF16 = 0, kMmaBf16 = 1, kMmaTf32 = 2 };
// Shuffles move a lane's value; votes combine the predicates (value != 0) of the lanes in the mask.
enum ShuffleKind {
  kShuffleIdx = 0,
  kShuffleXor = 1,
  kShuffleDown = 2,
  kShuffleUp = 3,
  kVoteAll = 4,
  kVoteAny = 5,
  kBallot = 6
};

struct Api {
  const ThreadIndex* (*index)();
  void (*syncthreads)(int line);
  void (*syncwarp)(unsigned mask);
  // Shared memory by byte offset into the block's dynamic shared memory; global memory by address.
  void (*shared_load)(unsigned offset, unsigned bytes, void* out);
  void (*shared_store)(unsigned offset, unsigned bytes, const void* in);
  void (*global_load)(const void* address, unsigned bytes, void* out);
  void (*global_store)(void* address, unsigned bytes, const void* in);
  // cp.async: `size` bytes to shared offset dst, the first src_bytes read from src (the rest zero-filled), performed
  // when a cp_async_wait retires its group.
  void (*cp_async)(unsigned dst, const void* src, unsigned size, unsigned src_bytes);
  void (*cp_async_commit)();
  void (*cp_async_wait)(int pending);
  // Warp collectives (every lane of the warp takes part).
  void (*ldmatrix)(unsigned* regs, int count, int trans, unsigned offset);
  void (*mma)(int kind, float* d, const unsigned* a, const unsigned* b);
  unsigned (*shuffle)(int kind, unsigned mask, unsigned value, int arg);
  // Conversions with the hardware's rounding.
  unsigned short (*f32_to_f16)(float);
  float (*f16_to_f32)(unsigned short);
  unsigned short (*f32_to_bf16)(float);
  unsigned (*f32_to_tf32)(unsigned bits);
};

}  // namespace tessera_emu
