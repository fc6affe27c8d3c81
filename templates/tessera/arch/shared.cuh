// Device bodies: shared-window addresses.
#pragma once

#include "tessera/platform.cuh"

namespace tessera {

// The 32-bit shared-window address of a generic pointer into shared memory.
TESSERA_DEVICE u32 shared_address(const void* generic) {
  u32 address;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(address) : "l"(generic));
  return address;
}

}  // namespace tessera
