// Device bodies: ldmatrix (sm_75+). Each lane passes the shared-memory byte offset of one 16-byte row of an 8×8 matrix
// of b16; lanes 0-7 address matrix 0, 8-15 matrix 1, 16-23 matrix 2, 24-31 matrix 3. Register i receives matrix i in
// the mma fragment layout (lane l holds row l/4, columns 2(l%4), 2(l%4)+1); .trans delivers the transpose.
#pragma once

#include "tessera/arch/shared.cuh"

namespace tessera {

TESSERA_DEVICE void ldmatrix_x1(u32 (&r)[1], u32 offset) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(shared_address(offset)));
}
TESSERA_DEVICE void ldmatrix_x2(u32 (&r)[2], u32 offset) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(offset)));
}
TESSERA_DEVICE void ldmatrix_x4(u32 (&r)[4], u32 offset) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(offset)));
}
TESSERA_DEVICE void ldmatrix_x1_trans(u32 (&r)[1], u32 offset) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(shared_address(offset)));
}
TESSERA_DEVICE void ldmatrix_x2_trans(u32 (&r)[2], u32 offset) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(offset)));
}
TESSERA_DEVICE void ldmatrix_x4_trans(u32 (&r)[4], u32 offset) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(offset)));
}

}  // namespace tessera
