// Device bodies: warp-wide mma.sync (sm_80+), D = A·B + C with f32 accumulators. Fragment layouts (PTX ISA,
// groupID g = lane/4, thread-in-group t = lane%4): C/D c0,c1 at row g, columns 2t, 2t+1; c2,c3 at row g+8.
#pragma once

#include "tessera/platform.cuh"

namespace tessera {

// m16n8k16, f16 inputs. A: 4 registers of 2 halves (rows g / g+8, columns 2t.. / 2t+8..); B: 2 registers
// (rows 2t.. / 2t+8.., column g).
TESSERA_DEVICE void mma_m16n8k16_f16(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// m16n8k16, bf16 inputs, the same fragment layout.
TESSERA_DEVICE void mma_m16n8k16_bf16(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// m16n8k8, tf32 inputs (one value per register). A: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4);
// B: b0 (t, g), b1 (t+4, g).
TESSERA_DEVICE void mma_m16n8k8_tf32(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

}  // namespace tessera
