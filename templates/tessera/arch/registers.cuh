// Device bodies: warpgroup register reallocation (sm_90a, setmaxnreg): a warp-specialised kernel gives its producer
// warpgroup few registers and its consumers more, within the block's budget (the launch's registers per thread
// times its threads). Every warp of a warpgroup executes the same one.
#pragma once

#include "tessera/platform.cuh"

namespace tessera {

// This warpgroup's registers per thread lowered to (dec) or raised to (inc) kCount, a multiple of 8 in [24, 256].
template <int kCount>
TESSERA_DEVICE void setmaxnreg_dec() {
  static_assert(kCount % 8 == 0 && kCount >= 24 && kCount <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kCount));
}
template <int kCount>
TESSERA_DEVICE void setmaxnreg_inc() {
  static_assert(kCount % 8 == 0 && kCount >= 24 && kCount <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kCount));
}

}  // namespace tessera
