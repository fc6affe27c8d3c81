// Library manifests: any bytes either parse into kernels with C identifiers for names, or throw tessera::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "generator/core/error.hpp"
#include "ops/library/library_manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const tessera::LibraryManifest m =
        tessera::parse_library_manifest(std::string(reinterpret_cast<const char*>(data), size));
    if (m.name.empty() || m.kernels.empty()) std::abort();
    for (const auto& k : m.kernels)
      if (k.name.empty() || k.targets.empty()) std::abort();
  } catch (const tessera::Error&) {
  }
  return 0;
}
