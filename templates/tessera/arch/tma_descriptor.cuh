// A TMA descriptor (a "tensor map"): 128 opaque bytes, 64-byte aligned, that a kernel takes as a __grid_constant__
// parameter and names in each cp.async.bulk.tensor. On the GPU the driver writes it (cuTensorMapEncodeTiled); for
// the SIMT emulator tessera writes its own contents (tessera_emu::TensorMapData) into the same bytes.
#pragma once

namespace tessera {

struct alignas(64) TmaDescriptor {
  unsigned long long opaque[16];
};

}  // namespace tessera
