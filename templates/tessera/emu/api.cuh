// The table of functions through which emulated kernels reach the SIMT emulator (jit/simt_emulator.cpp). The
// kernel's host build and the emulator both include this header, so the two sides agree on it by construction.
#pragma once

namespace tessera_emu {

struct Dim3 {
  unsigned x, y, z;
};

struct ThreadIndex {
  Dim3 thread_idx, block_idx, block_dim, grid_dim;
  unsigned cluster_rank, cluster_size;  // %cluster_ctarank, %cluster_nctarank (clusters along x)
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

// What the emulator's TMA descriptors hold (tessera::TmaDescriptor's bytes): a tiled view of a global tensor,
// innermost dimension first, as cuTensorMapEncodeTiled takes it.
struct TensorMapData {
  unsigned long long magic;  // kTensorMapMagic
  const void* global;
  unsigned rank, element_bytes;
  unsigned swizzle_bytes;  // 0 (none), 32, 64 or 128: the span of the 16-byte-chunk XOR pattern
  unsigned reserved;
  unsigned long long dims[3];
  unsigned long long strides[3];  // bytes between consecutive indices of dimensions 1.. (dimension 0 is contiguous)
  unsigned box[3];
};
constexpr unsigned long long kTensorMapMagic = 0x70616d726f736e65ULL;

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
  // mbarriers at shared offsets: arrive expects tx_bytes more transaction bytes first; wait blocks until the phase
  // of the given parity has completed.
  void (*mbarrier_init)(unsigned offset, unsigned count);
  void (*mbarrier_arrive)(unsigned offset, unsigned tx_bytes);
  void (*mbarrier_expect_tx)(unsigned offset, unsigned tx_bytes);
  int (*mbarrier_try_wait)(unsigned offset, unsigned parity);
  void (*mbarrier_wait)(unsigned offset, unsigned parity);
  // A TMA load: the box of the tensor `map` describes at `coords` (rank of them, innermost first) to shared offset
  // dst, its bytes completing on the mbarrier at offset `mbarrier`.
  void (*tma_load)(unsigned dst, const void* map, const int* coords, unsigned mbarrier);
  // Warpgroup MMAs (every thread of the 128 takes part): D (64 x n, n/2 floats per thread at d) = A·B (+ D when
  // accumulate), A and B read through shared-memory matrix descriptors, K-major or (bit 0 of transpose for A, bit 1
  // for B) M/N-major; results land at wgmma_wait.
  void (*wgmma)(int kind, int n, float* d, unsigned long long a, unsigned long long b, int accumulate, int transpose);
  void (*wgmma_commit)();
  void (*wgmma_wait)(int pending);
  // Conversions with the hardware's rounding.
  unsigned short (*f32_to_f16)(float);
  float (*f16_to_f32)(unsigned short);
  unsigned short (*f32_to_bf16)(float);
  unsigned (*f32_to_tf32)(unsigned bits);
  // A counter in global memory shared by the blocks of a launch: add (release) and wait until it reaches a value
  // (acquire). A wait that no running block can end fails as a deadlock.
  void (*flag_add)(int* address, int value);
  void (*flag_wait)(const int* address, int value);
  // A TMA store of the box at shared offset src to the tensor `map` describes at `coords`; its source stays read
  // (no writes allowed) until the issuing thread's tma_store_wait retires its group.
  void (*tma_store)(const void* map, unsigned src, const int* coords);
  void (*tma_store_commit)();
  void (*tma_store_wait)();
  // fence.proxy.async: this thread's shared-memory writes so far become visible to TMA (the async proxy).
  void (*fence_proxy_async)();
  // wgmma with A from registers: each thread's 4 registers of its warp's 16 rows of A (mma.sync's m16n8k16 A
  // fragment), B through its descriptor (bit 1 of transpose: N-major).
  // bar.sync (wait = 1) or bar.arrive (0) on named barrier id 1-15, whose round completes when `threads` arrived.
  void (*named_barrier)(int id, int threads, int wait);
  void (*wgmma_registers)(int kind, int n, float* d, const unsigned* a, unsigned long long b, int accumulate,
                          int transpose);
  // Thread-block clusters: barrier.cluster.arrive + wait (every thread of every block of the cluster); an arrive on
  // the mbarrier at `offset` of the cluster's block `rank` (mapa + mbarrier.arrive.shared::cluster); a TMA load whose
  // box lands at shared offset dst of every block in `mask` (bit r: rank r), each completing its bytes on its own
  // mbarrier at offset `mbarrier`.
  void (*cluster_sync)(int line);
  void (*mbarrier_arrive_cluster)(unsigned offset, unsigned rank);
  void (*tma_load_multicast)(unsigned dst, const void* map, const int* coords, unsigned mbarrier, unsigned mask);
};

}  // namespace tessera_emu
