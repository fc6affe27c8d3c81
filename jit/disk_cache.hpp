// Compiled kernels kept on disk between processes: CPU object code and CUDA cubins, one file per key under
// $TESSERA_CACHE_DIR/kernels. An entry is a short text header (key, name, kind, size, XXH3-128 of the payload) and the
// payload; it is written to a temporary file and renamed, so a reader never sees a partial entry, and an entry that is
// truncated, altered or written for another key is removed and reported as a miss. Entries are used least recently
// first evicted past a size cap.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "generator/core/kernel_spec.hpp"

namespace tessera {

// $TESSERA_CACHE_DIR, else $XDG_CACHE_HOME/tessera, else ~/.cache/tessera (created if needed; throws Unavailable
// when it cannot be).
std::string tessera_cache_dir();
// The same directory's name, nothing created (for looking up what may be there).
std::string tessera_cache_dir_path();

// A variable of the environment, "" when unset or empty.
std::string environment(const char* name);
// "<pid>-<random hex>": the name of a temporary file no other thread or process picks.
std::string unique_file_suffix();

// TESSERA_DUMP: writes `text` to dir/name (created if needed); a failure is reported once on stderr, never thrown.
void dump_file(const std::string& dir, const std::string& name, const std::string& text);

// The SHA-256 of the sources that shape generated code (scripts/fingerprint_sources.cmake): part of every key.
const char* generator_fingerprint();

struct DiskCacheEntry {
  std::string key, name, kind;  // kind: "cpu" (object code) or "cuda" (a cubin)
  std::uint64_t bytes = 0;      // of the whole file
  std::filesystem::file_time_type last_used;
  std::filesystem::path path;
};

struct DiskCacheVerify {
  int intact = 0, removed = 0;
  std::vector<std::string> problems;  // one line per removed entry: its file and what was wrong
};

class DiskCache {
 public:
  // A cache in `dir` (created if needed) holding at most max_bytes. A directory that cannot be created or written
  // leaves the cache working in memory only: loads miss, stores are dropped, and warning() says why.
  DiskCache(std::filesystem::path dir, std::uint64_t max_bytes);

  // The process's cache: $TESSERA_CACHE_DIR/kernels capped at $TESSERA_CACHE_MAX_MB (default 1024), or null when
  // TESSERA_CACHE=0. When the directory cannot be used, says so once on stderr.
  static DiskCache* process_cache();
  // $TESSERA_CACHE_MAX_MB in bytes (default 1 GiB; a value that is not a number is reported once and ignored).
  static std::uint64_t max_bytes_from_environment();

  // The payload stored under key, verified; a damaged or foreign entry is removed and counts as a miss. A hit
  // marks the entry as used now.
  std::optional<std::string> load(const Hash128& key) const;
  // Stores the payload (replacing any entry of the key), then evicts the least recently used entries past the cap.
  // Failures to write disable the cache for this process with a warning; they never throw.
  void store(const Hash128& key, std::string_view name, std::string_view kind, std::string_view payload) const;

  std::vector<DiskCacheEntry> list() const;  // most recently used first
  DiskCacheVerify verify() const;            // checks every entry, removing the damaged ones
  int clear() const;                         // removes every entry; returns how many
  // Removes the least recently used entries until the rest fit; returns the bytes left.
  std::uint64_t evict_to(std::uint64_t max_bytes) const;

  const std::filesystem::path& dir() const { return dir_; }
  std::uint64_t max_bytes() const { return max_bytes_; }
  bool writable() const;
  std::string warning() const;  // why the cache is memory-only, or ""

 private:
  struct State;
  std::filesystem::path dir_;
  std::uint64_t max_bytes_;
  std::shared_ptr<State> state_;
};

}  // namespace tessera
