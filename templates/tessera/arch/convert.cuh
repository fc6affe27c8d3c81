// Device bodies: conversions with the hardware's rounding.
#pragma once

#include "tessera/numeric.cuh"

namespace tessera {

TESSERA_DEVICE half_t f32_to_f16(float x) {
  half_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(x));
  return h;
}
TESSERA_DEVICE float f16_to_f32(half_t h) {
  float x;
  asm("cvt.f32.f16 %0, %1;" : "=f"(x) : "h"(h.bits));
  return x;
}
TESSERA_DEVICE bfloat16_t f32_to_bf16(float x) {
  bfloat16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(x));
  return h;
}
TESSERA_DEVICE float bf16_to_f32(bfloat16_t h) { return __uint_as_float(static_cast<u32>(h.bits) << 16); }
// f32 bits → tf32 (round to nearest, ties away from zero, as mma.sync expects its tf32 operands).
TESSERA_DEVICE u32 f32_to_tf32(u32 bits) {
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(bits)));
  return r;
}

}  // namespace tessera
