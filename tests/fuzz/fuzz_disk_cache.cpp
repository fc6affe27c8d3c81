// Disk-cache entries (files other processes, crashes and disks may have damaged): any bytes in an entry's file
// either load as its payload or are a miss that removes the file; listing and verifying never fail on them.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "jit/disk_cache.hpp"

namespace fs = std::filesystem;

namespace {

fs::path temporary_directory() {
  std::string pattern = (fs::temp_directory_path() / "tessera-fuzz-cache-XXXXXX").string();
  if (!mkdtemp(pattern.data())) std::abort();
  static const fs::path dir = pattern;
  std::atexit([] { fs::remove_all(dir); });
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fs::path dir = temporary_directory();
  static const tessera::DiskCache cache(dir, std::uint64_t{1} << 30);
  const tessera::Hash128 key{0x3ad3cbe9ee4620bdULL, 0xd233fae28b245a15ULL};  // the seed entry's key
  const fs::path file = dir / (key.hex() + ".kernel");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  const auto payload = cache.load(key);
  if (!payload && fs::exists(file)) std::abort();        // a damaged entry is removed, not left to fail again
  if (payload && payload->size() >= size) std::abort();  // the header comes before the payload
  cache.list();
  cache.verify();
  fs::remove(file);
  return 0;
}
