#include "jit/disk_cache.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>
#include <random>
#include <sstream>
#include <variant>

#include "generator/core/error.hpp"

namespace tessera {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kCacheEntryMagic = "tessera-kernel-cache 1\n";
constexpr const char* kSuffix = ".kernel";
// A temporary file this old was left by a process that died while writing it.
constexpr auto kStaleTemporary = std::chrono::hours(1);
constexpr int kStoresPerScan = 64;  // stores between directory scans for eviction (see State)

std::string env(const char* name) { return environment(name); }
std::string unique_suffix() { return unique_file_suffix(); }

std::optional<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return std::nullopt;
  return bytes;
}

struct ParsedEntry {
  std::string key, name, kind;
  std::string_view payload;
};

// The header's fields and the payload, or why the bytes are not an intact entry.
std::variant<ParsedEntry, std::string> parse_entry(const std::string& bytes) {
  if (bytes.compare(0, kCacheEntryMagic.size(), kCacheEntryMagic) != 0) return std::string("not a tessera cache entry");
  ParsedEntry e;
  std::uint64_t size = 0;
  std::string digest;
  std::size_t at = kCacheEntryMagic.size();
  for (;;) {
    const std::size_t end = bytes.find('\n', at);
    if (end == std::string::npos) return std::string("truncated header");
    const std::string_view line(bytes.data() + at, end - at);
    at = end + 1;
    if (line.empty()) break;
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos) return fmt::format("malformed header line '{}'", line);
    const std::string_view field = line.substr(0, space), value = line.substr(space + 1);
    if (field == "key") {
      e.key = value;
    } else if (field == "name") {
      e.name = value;
    } else if (field == "kind") {
      e.kind = value;
    } else if (field == "xxh3") {
      digest = value;
    } else if (field == "bytes") {
      if (std::from_chars(value.data(), value.data() + value.size(), size).ec != std::errc())
        return fmt::format("malformed size '{}'", value);
    }
  }
  if (bytes.size() - at != size)
    return fmt::format("payload of {} bytes where the header says {}", bytes.size() - at, size);
  e.payload = std::string_view(bytes.data() + at, size);
  if (hash_text(e.payload).hex() != digest) return std::string("checksum mismatch");
  return e;
}

bool is_entry(const fs::path& p) { return p.extension() == kSuffix; }
bool is_temporary(const fs::path& p) { return p.filename().string().rfind("tmp-", 0) == 0; }

}  // namespace

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : "";
}

std::string unique_file_suffix() {
  static std::mt19937_64 rng(std::random_device{}());
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  return fmt::format("{}-{:x}", getpid(), rng());
}

void dump_file(const std::string& dir, const std::string& name, const std::string& text) {
  std::error_code error;
  fs::create_directories(dir, error);
  std::ofstream out(fs::path(dir) / name, std::ios::binary);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (error || !out) {
    static std::once_flag once;
    std::call_once(
        once, [&] { std::fprintf(stderr, "tessera: TESSERA_DUMP: cannot write %s/%s\n", dir.c_str(), name.c_str()); });
  }
}

std::string tessera_cache_dir_path() {
  fs::path dir;
  if (!env("TESSERA_CACHE_DIR").empty())
    dir = env("TESSERA_CACHE_DIR");
  else if (!env("XDG_CACHE_HOME").empty())
    dir = fs::path(env("XDG_CACHE_HOME")) / "tessera";
  else if (!env("HOME").empty())
    dir = fs::path(env("HOME")) / ".cache" / "tessera";
  else
    dir = fs::temp_directory_path() / fmt::format("tessera-cache-{}", getuid());
  return dir.string();
}

std::string tessera_cache_dir() {
  const fs::path dir = tessera_cache_dir_path();
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) throw Unavailable(fmt::format("cache directory {}: {}", dir.string(), error.message()));
  return dir.string();
}

struct DiskCache::State {
  mutable std::mutex mutex;
  std::string warning;  // non-empty: memory only
  std::atomic<bool> writable{true};
  // The directory's size as of the last scan plus what this process stored since: a store scans the directory (for
  // eviction) only when that passes the cap or after kStoresPerScan stores, which catch other processes' entries. A
  // scan per store took tens of milliseconds with 20,000 entries.
  std::uint64_t bytes_since_scan = 0;
  int stores_since_scan = -1;  // -1: no scan yet
};

DiskCache::DiskCache(fs::path dir, std::uint64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes), state_(std::make_shared<State>()) {
  std::error_code error;
  fs::create_directories(dir_, error);
  if (!error && access(dir_.c_str(), W_OK | X_OK) != 0) error = std::error_code(errno, std::generic_category());
  if (error) {
    state_->warning = fmt::format("the kernel cache {} cannot be used ({}); kernels are kept in memory only",
                                  dir_.string(), error.message());
    state_->writable = false;
  }
}

std::uint64_t DiskCache::max_bytes_from_environment() {
  static const std::uint64_t bytes = [] {
    std::uint64_t max_mb = 1024;
    if (const std::string text = env("TESSERA_CACHE_MAX_MB"); !text.empty()) {
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), max_mb);
      if (ec != std::errc() || end != text.data() + text.size() || max_mb > (std::uint64_t{1} << 40)) {
        std::fprintf(stderr, "tessera: TESSERA_CACHE_MAX_MB='%s' is not a number of MiB; using 1024\n", text.c_str());
        max_mb = 1024;
      }
    }
    return max_mb << 20;
  }();
  return bytes;
}

DiskCache* DiskCache::process_cache() {
  static const std::unique_ptr<DiskCache> cache = []() -> std::unique_ptr<DiskCache> {
    if (env("TESSERA_CACHE") == "0") return nullptr;
    fs::path dir;
    try {
      dir = fs::path(tessera_cache_dir()) / "kernels";
    } catch (const Error& e) {
      dir = env("TESSERA_CACHE_DIR").empty() ? fs::path("~/.cache/tessera") : fs::path(env("TESSERA_CACHE_DIR"));
    }
    auto c = std::make_unique<DiskCache>(dir, max_bytes_from_environment());
    if (!c->warning().empty()) std::fprintf(stderr, "tessera: %s\n", c->warning().c_str());
    return c;
  }();
  return cache.get();
}

bool DiskCache::writable() const { return state_->writable; }

std::string DiskCache::warning() const {
  std::lock_guard lock(state_->mutex);
  return state_->warning;
}

std::optional<std::string> DiskCache::load(const Hash128& key) const {
  if (!writable()) return std::nullopt;
  const fs::path path = dir_ / (key.hex() + kSuffix);
  auto bytes = read_file(path);
  if (!bytes) return std::nullopt;
  auto parsed = parse_entry(*bytes);
  std::error_code ignored;
  if (std::holds_alternative<std::string>(parsed) || std::get<ParsedEntry>(parsed).key != key.hex()) {
    fs::remove(path, ignored);  // rebuilt by the caller and stored again
    return std::nullopt;
  }
  fs::last_write_time(path, fs::file_time_type::clock::now(), ignored);  // used now: evicted last
  return std::string(std::get<ParsedEntry>(parsed).payload);
}

void DiskCache::store(const Hash128& key, std::string_view name, std::string_view kind,
                      std::string_view payload) const {
  if (!writable()) return;
  const fs::path path = dir_ / (key.hex() + kSuffix);
  const fs::path tmp = dir_ / ("tmp-" + unique_suffix());
  std::string header = fmt::format("{}key {}\nname {}\nkind {}\nbytes {}\nxxh3 {}\n\n", kCacheEntryMagic, key.hex(),
                                   name, kind, payload.size(), hash_text(payload).hex());
  std::error_code error;
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    out.flush();
    if (!out) error = std::make_error_code(std::errc::io_error);
  }
  if (!error) fs::rename(tmp, path, error);
  if (error) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    std::lock_guard lock(state_->mutex);
    if (state_->writable.exchange(false)) {
      state_->warning = fmt::format("the kernel cache {} cannot be written ({}); kernels are kept in memory only",
                                    dir_.string(), error.message());
      std::fprintf(stderr, "tessera: %s\n", state_->warning.c_str());
    }
    return;
  }
  std::lock_guard lock(state_->mutex);
  state_->bytes_since_scan += header.size() + payload.size();
  if (state_->stores_since_scan < 0 || ++state_->stores_since_scan >= kStoresPerScan ||
      state_->bytes_since_scan > max_bytes_) {
    state_->bytes_since_scan = evict_to(max_bytes_);
    state_->stores_since_scan = 0;
  }
}

std::vector<DiskCacheEntry> DiskCache::list() const {
  std::vector<DiskCacheEntry> entries;
  std::error_code error;
  for (fs::directory_iterator it(dir_, error), end; !error && it != end; it.increment(error)) {
    if (!is_entry(it->path())) continue;
    DiskCacheEntry e;
    e.path = it->path();
    e.key = e.path.stem().string();
    std::error_code ignored;
    e.bytes = fs::file_size(e.path, ignored);
    e.last_used = fs::last_write_time(e.path, ignored);
    // The name and kind from the header alone: listing does not read the payloads.
    std::ifstream in(e.path, std::ios::binary);
    std::string line;
    for (int i = 0; i < 6 && std::getline(in, line) && !line.empty(); ++i) {
      if (line.rfind("name ", 0) == 0) e.name = line.substr(5);
      if (line.rfind("kind ", 0) == 0) e.kind = line.substr(5);
    }
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.last_used > b.last_used; });
  return entries;
}

DiskCacheVerify DiskCache::verify() const {
  DiskCacheVerify report;
  for (const auto& e : list()) {
    const auto bytes = read_file(e.path);
    std::string problem;
    if (!bytes) {
      problem = "cannot be read";
    } else if (auto parsed = parse_entry(*bytes); std::holds_alternative<std::string>(parsed)) {
      problem = std::get<std::string>(parsed);
    } else if (std::get<ParsedEntry>(parsed).key != e.key) {
      problem = "holds the entry of another key";
    }
    if (problem.empty()) {
      ++report.intact;
      continue;
    }
    std::error_code ignored;
    fs::remove(e.path, ignored);
    ++report.removed;
    report.problems.push_back(fmt::format("{}: {}", e.path.filename().string(), problem));
  }
  return report;
}

int DiskCache::clear() const {
  int removed = 0;
  std::error_code error;
  for (fs::directory_iterator it(dir_, error), end; !error && it != end; it.increment(error)) {
    if (!is_entry(it->path()) && !is_temporary(it->path())) continue;
    std::error_code ignored;
    removed += is_entry(it->path()) && fs::remove(it->path(), ignored);
    if (is_temporary(it->path())) fs::remove(it->path(), ignored);
  }
  return removed;
}

std::uint64_t DiskCache::evict_to(std::uint64_t max_bytes) const {
  // Sizes and times only (no header reads: this runs on stores).
  std::vector<DiskCacheEntry> entries;
  std::error_code scan_error;
  for (fs::directory_iterator it(dir_, scan_error), end; !scan_error && it != end; it.increment(scan_error)) {
    if (!is_entry(it->path())) continue;
    std::error_code ignored;
    DiskCacheEntry e;
    e.path = it->path();
    e.bytes = it->file_size(ignored);
    e.last_used = it->last_write_time(ignored);
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.last_used > b.last_used; });
  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  // Least recently used first, until the rest fits.
  for (auto it = entries.rbegin(); total > max_bytes && it != entries.rend(); ++it) {
    std::error_code ignored;
    if (fs::remove(it->path, ignored)) total -= it->bytes;
  }
  // Temporary files of processes that died while writing.
  std::error_code error;
  const auto now = fs::file_time_type::clock::now();
  for (fs::directory_iterator it(dir_, error), end; !error && it != end; it.increment(error)) {
    std::error_code ignored;
    if (is_temporary(it->path()) && now - fs::last_write_time(it->path(), ignored) > kStaleTemporary)
      fs::remove(it->path(), ignored);
  }
  return total;
}

}  // namespace tessera
