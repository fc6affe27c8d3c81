// The disk cache of compiled kernels: entries round-trip and are verified, every damaged or foreign entry is removed
// and rebuilt, an unusable directory leaves the runtime working from memory, the size cap evicts the least recently
// used entry, and concurrent requests (threads and processes) always get a whole kernel.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <thread>

#include "jit/disk_cache.hpp"
#include "tessera/reference.hpp"
#include "tessera/tessera.hpp"
#include "tests/test_util.hpp"

namespace tessera {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("tessera-disk-cache-test-" + std::to_string(getpid()) + "-" + std::to_string(std::random_device{}()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

fs::path only_entry(const fs::path& dir) {
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".kernel") entries.push_back(e.path());
  EXPECT_EQ(entries.size(), 1u);
  return entries.empty() ? fs::path() : entries[0];
}

TEST(DiskCache, EntriesRoundTripAndAreListed) {
  TempDir dir;
  DiskCache cache(dir.path, 1 << 20);
  EXPECT_TRUE(cache.writable());
  const std::string payload("object\0code\nwith newlines", 25);
  cache.store({1, 2}, "gemm_x", "cpu", payload);
  cache.store({3, 4}, "spmm_y", "cuda", "cubin");
  EXPECT_EQ(cache.load({1, 2}).value_or(""), payload);
  EXPECT_EQ(cache.load({3, 4}).value_or(""), "cubin");
  EXPECT_FALSE(cache.load({5, 6}));
  const auto entries = cache.list();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].name, "spmm_y");  // the most recently used first
  EXPECT_EQ(entries[0].kind, "cuda");
  EXPECT_EQ(entries[1].name, "gemm_x");
  EXPECT_EQ(cache.verify().intact, 2);
  EXPECT_EQ(cache.clear(), 2);
  EXPECT_FALSE(cache.load({1, 2}));
}

TEST(DiskCache, DamagedAndForeignEntriesAreRemovedNotReturned) {
  TempDir dir;
  DiskCache cache(dir.path, 1 << 20);
  const std::string payload(4096, 'x');
  const auto damage = [&](const std::function<std::string(std::string)>& how) {
    cache.store({9, 9}, "k", "cpu", payload);
    const fs::path entry = only_entry(dir.path);
    write_all(entry, how(read_all(entry)));
    EXPECT_FALSE(cache.load({9, 9}));
    EXPECT_FALSE(fs::exists(entry));  // removed, so the next request rebuilds and stores it again
  };
  damage([](std::string s) { return s.substr(0, s.size() / 2); });       // truncated
  damage([](std::string s) { return s.substr(0, 20); });                 // truncated in the header
  damage([](std::string) { return std::string(); });                     // empty
  damage([](std::string s) { return s + "tail"; });                      // grown
  damage([](std::string s) { return s.back() ^= 1, s; });                // a bit flipped in the payload
  damage([](std::string s) { return s[s.find("xxh3 ") + 7] ^= 1, s; });  // in the checksum
  damage([](std::string s) { return s[3] = 'X', s; });                   // in the magic
  damage([](std::string) {
    return std::string(
        "\x7f"
        "ELF garbage");
  });  // foreign bytes
  // Another key's intact entry under this key's name.
  cache.store({1, 1}, "other", "cpu", payload);
  const fs::path other = only_entry(dir.path);
  fs::rename(other, dir.path / (Hash128{9, 9}.hex() + ".kernel"));
  EXPECT_FALSE(cache.load({9, 9}));
  // verify() finds and removes what load would.
  cache.store({2, 2}, "good", "cpu", payload);
  cache.store({3, 3}, "bad", "cpu", payload);
  for (const auto& e : cache.list())
    if (e.name == "bad") write_all(e.path, read_all(e.path).substr(0, 100));
  const DiskCacheVerify v = cache.verify();
  EXPECT_EQ(v.intact, 1);
  EXPECT_EQ(v.removed, 1);
  ASSERT_EQ(v.problems.size(), 1u);
  EXPECT_NE(v.problems[0].find("header"), std::string::npos) << v.problems[0];
}

TEST(DiskCache, TheSizeCapEvictsTheLeastRecentlyUsed) {
  TempDir dir;
  const std::string payload(1000, 'p');
  DiskCache cache(dir.path, 2600);  // room for two entries with their headers
  cache.store({1, 0}, "first", "cpu", payload);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  cache.store({2, 0}, "second", "cpu", payload);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(cache.load({1, 0}));  // the first is now the most recently used
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  cache.store({3, 0}, "third", "cpu", payload);
  EXPECT_TRUE(cache.load({1, 0}));
  EXPECT_FALSE(cache.load({2, 0}));
  EXPECT_TRUE(cache.load({3, 0}));
}

TEST(DiskCache, AnUnusableDirectoryLeavesTheCacheInMemory) {
  TempDir dir;
  write_all(dir.path / "file", "a file where the cache's folder should be");
  for (const fs::path& bad : {dir.path / "file" / "kernels", fs::path("/proc/tessera-cache")}) {
    DiskCache cache(bad, 1 << 20);
    EXPECT_FALSE(cache.writable()) << bad;
    EXPECT_NE(cache.warning().find(bad.string()), std::string::npos) << cache.warning();
    cache.store({1, 1}, "k", "cpu", "payload");  // dropped, not thrown
    EXPECT_FALSE(cache.load({1, 1}));
    EXPECT_TRUE(cache.list().empty());
  }
}

// A GEMM through a runtime whose kernels live in `cache_dir`, checked exactly against a plain loop.
std::string gemm_origin(const std::string& cache_dir, std::int64_t m = 37, std::int64_t n = 29, std::int64_t k = 41,
                        int threads = 1) {
  RuntimeOptions options;
  options.threads = threads;
  options.cache_dir = cache_dir;
  options.cost_model = "heuristic";
  Runtime runtime(options);
  std::mt19937 rng(7);
  test::Matrix a(1, m, k, Layout::row_major()), b(1, k, n, Layout::row_major()), d(1, m, n, Layout::row_major());
  a.fill_integers(rng);
  b.fill_integers(rng);
  GemmArgs args;
  args.a = a.view;
  args.b = b.view;
  args.d = d.view;
  const GemmKernel kernel = runtime.compile(runtime.describe(args));
  kernel.run(args);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float want = 0;
      for (std::int64_t p = 0; p < k; ++p) want += a.at(0, i, p) * b.at(0, p, j);
      if (d.at(0, i, j) != want) return "wrong result";
    }
  return kernel.origin();
}

TEST(DiskCache, ASecondRuntimeTakesTheKernelFromDiskAndDamageIsRebuilt) {
  TempDir dir;
  EXPECT_EQ(gemm_origin(dir.path.string()), "built");
  EXPECT_EQ(gemm_origin(dir.path.string()), "disk");
  const fs::path entry = only_entry(dir.path);
  std::string bytes = read_all(entry);
  bytes[bytes.size() - 100] ^= 0x10;  // a flipped bit in the object code
  write_all(entry, bytes);
  EXPECT_EQ(gemm_origin(dir.path.string()), "built");
  EXPECT_EQ(gemm_origin(dir.path.string()), "disk");
  fs::resize_file(entry, fs::file_size(entry) / 3);  // truncated
  EXPECT_EQ(gemm_origin(dir.path.string()), "built");
  // A directory that cannot be used: built, right, and nothing written.
  write_all(dir.path / "plainfile", "");
  EXPECT_EQ(gemm_origin((dir.path / "plainfile" / "kernels").string()), "built");
}

// With two threads a kernel's functions compile in two parts; the entry holds both objects, later runtimes (of any
// thread count) link them and the result is exact; damage is rebuilt. (130×70×90: packing, micro-kernels and a
// driver; a small fixed-size kernel is one function, compiled whole.)
TEST(DiskCache, AKernelCompiledInPartsIsKeptWhole) {
  TempDir dir;
  EXPECT_EQ(gemm_origin(dir.path.string(), 130, 70, 90, 2), "built");
  const fs::path entry = only_entry(dir.path);
  std::string bytes = read_all(entry);
  const std::size_t magic = bytes.find("tessera object bundle 1\n");
  ASSERT_NE(magic, std::string::npos) << "a 2-thread runtime compiled the kernel in one part";
  EXPECT_EQ(gemm_origin(dir.path.string(), 130, 70, 90, 2), "disk");
  EXPECT_EQ(gemm_origin(dir.path.string(), 130, 70, 90, 1), "disk");  // a one-thread runtime links the parts too
  bytes[magic + 40] ^= 0x01;                                          // inside the first part's size or bytes
  write_all(entry, bytes);
  EXPECT_EQ(gemm_origin(dir.path.string(), 130, 70, 90, 2), "built");
  EXPECT_EQ(gemm_origin(dir.path.string(), 130, 70, 90, 2), "disk");
}

TEST(DiskCache, ConcurrentThreadsGetWholeKernels) {
  // Eight runtimes on eight threads ask for the same new kernel at once (two processes: tests/cli_test.sh).
  TempDir dir;
  std::vector<std::string> origins(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] { origins[static_cast<std::size_t>(t)] = gemm_origin(dir.path.string(), 61, 67, 71); });
  for (auto& t : threads) t.join();
  for (const auto& o : origins) EXPECT_TRUE(o == "built" || o == "disk") << o;
  EXPECT_EQ(DiskCache(dir.path, 1 << 20).verify().intact, 1);
  EXPECT_EQ(gemm_origin(dir.path.string(), 61, 67, 71), "disk");
}

}  // namespace
}  // namespace tessera
