// Device bodies: warpgroup MMAs (sm_90a, wgmma.mma_async): the four warps of a warpgroup (128 threads, warp index
// a multiple of 4) multiply a 64x16 A by a 16xN B (64x8 by 8xN for tf32), both read from shared memory through 64-bit
// matrix descriptors, into 64xN f32 accumulators held N/2 per thread (warp w of the group holds rows 16w..16w+15 in
// mma.sync's m16n8 C-fragment layout, repeated for each 8 columns: d[4j..4j+3] = (g, 8j+2t), (g, 8j+2t+1), (g+8,
// 8j+2t), (g+8, 8j+2t+1) with g = lane/4, t = lane%4). The MMAs run asynchronously: wgmma_commit() closes a group,
// wgmma_wait<N>() waits until at most N groups are in flight, and only then are the accumulators defined and the
// shared tiles free to be overwritten; wgmma_fence() orders earlier register writes of the accumulators before them.
//
// Both operands here are K-major (A row-major MxK, B as N rows of K): a descriptor names the tile's start, the
// distance between 8-row groups (SBO) and, without swizzle, between the two 16-byte halves of a row's 16 K values
// (LBO); swizzled layouts (what TMA writes with the same span) keep each 8-row group's rows 32, 64 or 128 bytes
// apart with 16-byte chunks XORed by the row (CUTLASS's Swizzle<1|2|3,4,3>).
#pragma once

#include "tessera/arch/shared.cuh"

namespace tessera {

// Swizzle modes of a descriptor (bits 62-63).
enum WgmmaSwizzle : int { kWgmmaInterleave = 0, kWgmma128B = 1, kWgmma64B = 2, kWgmma32B = 3 };

// A shared-memory matrix descriptor: start address, leading and stride byte offsets (each >> 4) and the swizzle.
TESSERA_DEVICE unsigned long long wgmma_descriptor(u32 offset, u32 leading_bytes, u32 stride_bytes, int swizzle) {
  return static_cast<unsigned long long>((shared_address(offset) & 0x3ffffu) >> 4) |
         static_cast<unsigned long long>((leading_bytes & 0x3ffffu) >> 4) << 16 |
         static_cast<unsigned long long>((stride_bytes & 0x3ffffu) >> 4) << 32 |
         static_cast<unsigned long long>(swizzle & 3) << 62;
}

TESSERA_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
TESSERA_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
TESSERA_DEVICE void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// The input types of wgmma (the values of the emulator's MmaKind).
enum WgmmaInput : int { kWgmmaF16 = 0, kWgmmaBf16 = 1, kWgmmaTf32 = 2 };

// A thread's COUNT accumulators (32, 64 or 128: N/2) as asm operands, and their names in the instruction.
#define TESSERA_WGMMA_D8(i)                                                                               \
  "+f"(d[(i)]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]), "+f"(d[(i) + 5]), \
      "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define TESSERA_WGMMA_D32(i) \
  TESSERA_WGMMA_D8(i), TESSERA_WGMMA_D8((i) + 8), TESSERA_WGMMA_D8((i) + 16), TESSERA_WGMMA_D8((i) + 24)
#define TESSERA_WGMMA_OUT_32 TESSERA_WGMMA_D32(0)
#define TESSERA_WGMMA_OUT_64 TESSERA_WGMMA_D32(0), TESSERA_WGMMA_D32(32)
#define TESSERA_WGMMA_OUT_128 TESSERA_WGMMA_OUT_64, TESSERA_WGMMA_D32(64), TESSERA_WGMMA_D32(96)
#define TESSERA_WGMMA_NAMES_32                                                                           \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
  "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define TESSERA_WGMMA_NAMES_64                                                         \
  TESSERA_WGMMA_NAMES_32                                                               \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define TESSERA_WGMMA_NAMES_128                                                        \
  TESSERA_WGMMA_NAMES_64                                                               \
  ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "   \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, "   \
  "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, "     \
  "%123, %124, %125, %126, %127"

// One wgmma.mma_async m64nNkK with f32 accumulators for TYPES ("f16.f16"), COUNT = N/2 of them per thread; the
// inputs are numbered after them: the descriptors of A and B (DESC), the scale-d flag (FLAG) and the transposes,
// which TRANSPOSES names for 16-bit inputs (tf32 has none).
#define TESSERA_WGMMA_ASM(N, K, TYPES, COUNT, DESC, FLAG, TRANSPOSES)                                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " FLAG                                                     \
               ", 0;\n"                                                                                     \
               "wgmma.mma_async.sync.aligned.m64n" #N "k" #K ".f32." TYPES " {" TESSERA_WGMMA_NAMES_##COUNT \
               "}, " DESC ", p, 1, 1" TRANSPOSES ";\n}\n"                                                   \
               : TESSERA_WGMMA_OUT_##COUNT                                                                  \
               : "l"(a), "l"(b), "r"(accumulate), "n"(kTransA), "n"(kTransB)                                \
               : "memory")
#define TESSERA_WGMMA_N(N, COUNT, DESC, FLAG, TRANSPOSES)                 \
  if constexpr (kInput == kWgmmaTf32)                                     \
    TESSERA_WGMMA_ASM(N, 8, "tf32.tf32", COUNT, DESC, FLAG, "");          \
  else if constexpr (kInput == kWgmmaBf16)                                \
    TESSERA_WGMMA_ASM(N, 16, "bf16.bf16", COUNT, DESC, FLAG, TRANSPOSES); \
  else                                                                    \
    TESSERA_WGMMA_ASM(N, 16, "f16.f16", COUNT, DESC, FLAG, TRANSPOSES)

// d (64xN f32, N/2 per thread) += A (64xK) · B (KxN), K = 16 for f16 and bf16, 8 for tf32, from the descriptors a and
// b; accumulate = 0 overwrites d. kTransA / kTransB = 1 for an M- / N-major 16-bit operand.
template <int kInput, int kN, int kTransA = 0, int kTransB = 0>
TESSERA_DEVICE void wgmma(float (&d)[kN / 2], unsigned long long a, unsigned long long b, int accumulate) {
  static_assert(kN == 64 || kN == 128 || kN == 256, "wgmma: N is 64, 128 or 256");
  static_assert(kInput != kWgmmaTf32 || (kTransA == 0 && kTransB == 0), "wgmma: tf32 operands are K-major only");
  if constexpr (kN == 64) {
    TESSERA_WGMMA_N(64, 32, "%32, %33", "%34", ", %35, %36");
  } else if constexpr (kN == 128) {
    TESSERA_WGMMA_N(128, 64, "%64, %65", "%66", ", %67, %68");
  } else {
    TESSERA_WGMMA_N(256, 128, "%128, %129", "%130", ", %131, %132");
  }
}

// The same with A from registers (the "RS" form): each thread supplies its 4 registers of A's 64x16 in mma.sync's
// m16n8k16 A-fragment layout for its warp's 16 rows (a[0] = (g, 2t..2t+1), a[1] = (g+8, ..), a[2] = (g, 2t+8..),
// a[3] = (g+8, 2t+8..)), 16-bit inputs only; the registers must keep their values until the MMA retires.
#define TESSERA_WGMMA_RS_ASM(N, TYPES, COUNT, A, B, FLAG, TB)                                                         \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " FLAG ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPES \
               " {" TESSERA_WGMMA_NAMES_##COUNT "}, {" A "}, " B ", p, 1, 1, " TB ";\n}\n"                            \
               : TESSERA_WGMMA_OUT_##COUNT                                                                            \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate), "n"(kTransB)                    \
               : "memory")
#define TESSERA_WGMMA_RS_N(N, COUNT, A, B, FLAG, TB)             \
  if constexpr (kInput == kWgmmaBf16)                            \
    TESSERA_WGMMA_RS_ASM(N, "bf16.bf16", COUNT, A, B, FLAG, TB); \
  else                                                           \
    TESSERA_WGMMA_RS_ASM(N, "f16.f16", COUNT, A, B, FLAG, TB)

// d (64xN f32, N/2 per thread) += A (64x16, this thread's fragment in a) · B (16xN) from descriptor b; kTransB = 1
// for an N-major B.
template <int kInput, int kN, int kTransB = 0>
TESSERA_DEVICE void wgmma_rs(float (&d)[kN / 2], const u32 (&a)[4], unsigned long long b, int accumulate) {
  static_assert(kN == 64 || kN == 128 || kN == 256, "wgmma: N is 64, 128 or 256");
  static_assert(kInput != kWgmmaTf32, "wgmma_rs: 16-bit inputs only");
  if constexpr (kN == 64) {
    TESSERA_WGMMA_RS_N(64, 32, "%32, %33, %34, %35", "%36", "%37", "%38");
  } else if constexpr (kN == 128) {
    TESSERA_WGMMA_RS_N(128, 64, "%64, %65, %66, %67", "%68", "%69", "%70");
  } else {
    TESSERA_WGMMA_RS_N(256, 128, "%128, %129, %130, %131", "%132", "%133", "%134");
  }
}

#undef TESSERA_WGMMA_RS_N
#undef TESSERA_WGMMA_RS_ASM
#undef TESSERA_WGMMA_N
#undef TESSERA_WGMMA_ASM
#undef TESSERA_WGMMA_NAMES_128
#undef TESSERA_WGMMA_NAMES_64
#undef TESSERA_WGMMA_NAMES_32
#undef TESSERA_WGMMA_OUT_128
#undef TESSERA_WGMMA_OUT_64
#undef TESSERA_WGMMA_OUT_32
#undef TESSERA_WGMMA_D32
#undef TESSERA_WGMMA_D8

}  // namespace tessera
