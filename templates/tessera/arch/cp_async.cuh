// Device bodies: asynchronous global→shared copies (sm_80+) to a shared-memory byte offset. `src_bytes` < the copy size
// zero-fills the rest, which is how edge tiles are predicated: 0 copies nothing and writes zeros.
#pragma once

#include "tessera/arch/shared.cuh"

namespace tessera {

// 16 bytes, cached in L2 only (.cg): operand tiles are reused from shared memory, not L1.
TESSERA_DEVICE void cp_async_16(u32 dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src), "r"(src_bytes));
}
// 8 and 4 bytes: .cg only exists for 16, so narrower (less aligned) copies go through L1 (.ca).
TESSERA_DEVICE void cp_async_8(u32 dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(shared_address(dst)), "l"(src), "r"(src_bytes));
}
TESSERA_DEVICE void cp_async_4(u32 dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)), "l"(src), "r"(src_bytes));
}
TESSERA_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N committed groups are still in flight.
template <int N>
TESSERA_DEVICE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace tessera
