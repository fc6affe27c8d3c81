// Compiles a CUDA kernel source as host C++ for the SIMT emulator: the embedded templates are written once to the
// cache directory, the host compiler runs as a subprocess, and the shared library is cached on disk by content
// (written to a temporary name and renamed into place; an entry that fails to load is discarded and rebuilt).
#pragma once

#include <string>

namespace tessera {

struct HostKernelLibrary {
  std::string path;        // the cached shared library
  void* handle = nullptr;  // dlopen'ed, never closed (kernels may be running from it)
  double compile_ms = 0;   // 0 when it came from the cache
};

// Throws CompileError with the compiler's output when the source does not compile.
HostKernelLibrary compile_host_kernel(const std::string& source, const std::string& name);

// The symbol suffix of the entry the host compiler adds for each extern "C" __global__ kernel of a source:
// `void <kernel><suffix>(const void* params)` calls the kernel with the parameter block the bytes hold.
inline constexpr const char* kEmulatorEntrySuffix = "__emu_entry";
// A kernel declared with __cluster_dims__(x, y, z) also gets "<kernel>__emu_cluster", the three extents.
inline constexpr const char* kEmulatorClusterSuffix = "__emu_cluster";

}  // namespace tessera
