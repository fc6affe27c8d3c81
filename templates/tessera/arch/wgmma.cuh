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

#define TESSERA_WGMMA_D8(i)                                                                               \
  "+f"(d[(i)]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]), "+f"(d[(i) + 5]), \
      "+f"(d[(i) + 6]), "+f"(d[(i) + 7])

// m64n64k16 with f32 accumulators, for the 16-bit input type TYPE ("f16.f16" or "bf16.bf16"); kTransA / kTransB
// = 1 for an M- / N-major operand.
#define TESSERA_WGMMA_M64N64K16(NAME, TYPE)                                                                    \
  template <int kTransA = 0, int kTransB = 0>                                                                  \
  TESSERA_DEVICE void NAME(float(&d)[32], unsigned long long a, unsigned long long b, int accumulate) {        \
    asm volatile(                                                                                              \
        "{\n.reg .pred p;\n"                                                                                   \
        "setp.ne.b32 p, %34, 0;\n"                                                                             \
        "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE                                                     \
        " {"                                                                                                   \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
        "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31"                                                     \
        "}, %32, %33, p, 1, 1, %35, %36;\n}\n"                                                                 \
        : TESSERA_WGMMA_D8(0), TESSERA_WGMMA_D8(8), TESSERA_WGMMA_D8(16), TESSERA_WGMMA_D8(24)                 \
        : "l"(a), "l"(b), "r"(accumulate), "n"(kTransA), "n"(kTransB)                                          \
        : "memory");                                                                                           \
  }

// m64n128k16 with f32 accumulators, for the 16-bit input type TYPE ("f16.f16" or "bf16.bf16"); kTransA / kTransB
// = 1 for an M- / N-major operand.
#define TESSERA_WGMMA_M64N128K16(NAME, TYPE)                                                                          \
  template <int kTransA = 0, int kTransB = 0>                                                                         \
  TESSERA_DEVICE void NAME(float(&d)[64], unsigned long long a, unsigned long long b, int accumulate) {               \
    asm volatile(                                                                                                     \
        "{\n.reg .pred p;\n"                                                                                          \
        "setp.ne.b32 p, %66, 0;\n"                                                                                    \
        "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE                                                           \
        " {"                                                                                                          \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "        \
        "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "        \
        "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "        \
        "%62, %63"                                                                                                    \
        "}, %64, %65, p, 1, 1, %67, %68;\n}\n"                                                                        \
        : TESSERA_WGMMA_D8(0), TESSERA_WGMMA_D8(8), TESSERA_WGMMA_D8(16), TESSERA_WGMMA_D8(24), TESSERA_WGMMA_D8(32), \
          TESSERA_WGMMA_D8(40), TESSERA_WGMMA_D8(48), TESSERA_WGMMA_D8(56)                                            \
        : "l"(a), "l"(b), "r"(accumulate), "n"(kTransA), "n"(kTransB)                                                 \
        : "memory");                                                                                                  \
  }

// m64n256k16 with f32 accumulators, for the 16-bit input type TYPE ("f16.f16" or "bf16.bf16"); kTransA / kTransB
// = 1 for an M- / N-major operand.
#define TESSERA_WGMMA_M64N256K16(NAME, TYPE)                                                                          \
  template <int kTransA = 0, int kTransB = 0>                                                                         \
  TESSERA_DEVICE void NAME(float(&d)[128], unsigned long long a, unsigned long long b, int accumulate) {              \
    asm volatile(                                                                                                     \
        "{\n.reg .pred p;\n"                                                                                          \
        "setp.ne.b32 p, %130, 0;\n"                                                                                   \
        "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE                                                           \
        " {"                                                                                                          \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "        \
        "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "        \
        "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "        \
        "%62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, "        \
        "%82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, "            \
        "%101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, "            \
        "%117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"                                            \
        "}, %128, %129, p, 1, 1, %131, %132;\n}\n"                                                                    \
        : TESSERA_WGMMA_D8(0), TESSERA_WGMMA_D8(8), TESSERA_WGMMA_D8(16), TESSERA_WGMMA_D8(24), TESSERA_WGMMA_D8(32), \
          TESSERA_WGMMA_D8(40), TESSERA_WGMMA_D8(48), TESSERA_WGMMA_D8(56), TESSERA_WGMMA_D8(64),                     \
          TESSERA_WGMMA_D8(72), TESSERA_WGMMA_D8(80), TESSERA_WGMMA_D8(88), TESSERA_WGMMA_D8(96),                     \
          TESSERA_WGMMA_D8(104), TESSERA_WGMMA_D8(112), TESSERA_WGMMA_D8(120)                                         \
        : "l"(a), "l"(b), "r"(accumulate), "n"(kTransA), "n"(kTransB)                                                 \
        : "memory");                                                                                                  \
  }

// m64n64k8 with f32 accumulators for tf32 inputs (f32 in memory, the low 13 mantissa bits ignored; both operands
// K-major: tf32 has no transpose).
#define TESSERA_WGMMA_M64N64K8(NAME)                                                                           \
  TESSERA_DEVICE void NAME(float(&d)[32], unsigned long long a, unsigned long long b, int accumulate) {        \
    asm volatile(                                                                                              \
        "{\n.reg .pred p;\n"                                                                                   \
        "setp.ne.b32 p, %34, 0;\n"                                                                             \
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {"                                                \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
        "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31"                                                     \
        "}, %32, %33, p, 1, 1;\n}\n"                                                                           \
        : TESSERA_WGMMA_D8(0), TESSERA_WGMMA_D8(8), TESSERA_WGMMA_D8(16), TESSERA_WGMMA_D8(24)                 \
        : "l"(a), "l"(b), "r"(accumulate)                                                                      \
        : "memory");                                                                                           \
  }

// m64n128k8 with f32 accumulators for tf32 inputs (f32 in memory, the low 13 mantissa bits ignored; both operands
// K-major: tf32 has no transpose).
#define TESSERA_WGMMA_M64N128K8(NAME)                                                                                 \
  TESSERA_DEVICE void NAME(float(&d)[64], unsigned long long a, unsigned long long b, int accumulate) {               \
    asm volatile(                                                                                                     \
        "{\n.reg .pred p;\n"                                                                                          \
        "setp.ne.b32 p, %66, 0;\n"                                                                                    \
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 {"                                                      \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "        \
        "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "        \
        "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "        \
        "%62, %63"                                                                                                    \
        "}, %64, %65, p, 1, 1;\n}\n"                                                                                  \
        : TESSERA_WGMMA_D8(0), TESSERA_WGMMA_D8(8), TESSERA_WGMMA_D8(16), TESSERA_WGMMA_D8(24), TESSERA_WGMMA_D8(32), \
          TESSERA_WGMMA_D8(40), TESSERA_WGMMA_D8(48), TESSERA_WGMMA_D8(56)                                            \
        : "l"(a), "l"(b), "r"(accumulate)                                                                             \
        : "memory");                                                                                                  \
  }

// m64n256k8 with f32 accumulators for tf32 inputs (f32 in memory, the low 13 mantissa bits ignored; both operands
// K-major: tf32 has no transpose).
#define TESSERA_WGMMA_M64N256K8(NAME)                                                                                 \
  TESSERA_DEVICE void NAME(float(&d)[128], unsigned long long a, unsigned long long b, int accumulate) {              \
    asm volatile(                                                                                                     \
        "{\n.reg .pred p;\n"                                                                                          \
        "setp.ne.b32 p, %130, 0;\n"                                                                                   \
        "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {"                                                      \
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "        \
        "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, "        \
        "%42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "        \
        "%62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, "        \
        "%82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, "            \
        "%101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, "            \
        "%117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"                                            \
        "}, %128, %129, p, 1, 1;\n}\n"                                                                                \
        : TESSERA_WGMMA_D8(0), TESSERA_WGMMA_D8(8), TESSERA_WGMMA_D8(16), TESSERA_WGMMA_D8(24), TESSERA_WGMMA_D8(32), \
          TESSERA_WGMMA_D8(40), TESSERA_WGMMA_D8(48), TESSERA_WGMMA_D8(56), TESSERA_WGMMA_D8(64),                     \
          TESSERA_WGMMA_D8(72), TESSERA_WGMMA_D8(80), TESSERA_WGMMA_D8(88), TESSERA_WGMMA_D8(96),                     \
          TESSERA_WGMMA_D8(104), TESSERA_WGMMA_D8(112), TESSERA_WGMMA_D8(120)                                         \
        : "l"(a), "l"(b), "r"(accumulate)                                                                             \
        : "memory");                                                                                                  \
  }

TESSERA_WGMMA_M64N64K16(wgmma_m64n64k16_f16, "f16.f16")
TESSERA_WGMMA_M64N64K16(wgmma_m64n64k16_bf16, "bf16.bf16")
TESSERA_WGMMA_M64N128K16(wgmma_m64n128k16_f16, "f16.f16")
TESSERA_WGMMA_M64N128K16(wgmma_m64n128k16_bf16, "bf16.bf16")
TESSERA_WGMMA_M64N256K16(wgmma_m64n256k16_f16, "f16.f16")
TESSERA_WGMMA_M64N256K16(wgmma_m64n256k16_bf16, "bf16.bf16")
TESSERA_WGMMA_M64N64K8(wgmma_m64n64k8_tf32)
TESSERA_WGMMA_M64N128K8(wgmma_m64n128k8_tf32)
TESSERA_WGMMA_M64N256K8(wgmma_m64n256k8_tf32)

#undef TESSERA_WGMMA_M64N64K16
#undef TESSERA_WGMMA_M64N128K16
#undef TESSERA_WGMMA_M64N256K16
#undef TESSERA_WGMMA_M64N64K8
#undef TESSERA_WGMMA_M64N128K8
#undef TESSERA_WGMMA_M64N256K8
#undef TESSERA_WGMMA_D8

}  // namespace tessera
