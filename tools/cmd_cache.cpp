// `tessera cache list|stats|verify|clear`: the disk cache of compiled kernels ($TESSERA_CACHE_DIR/kernels).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>

#include "cli_common.hpp"
#include "commands.hpp"
#include "jit/disk_cache.hpp"

namespace tessera::cli {

namespace {

// The process cache, or why there is none.
const DiskCache& cache() {
  const DiskCache* c = DiskCache::process_cache();
  if (!c) throw Unavailable("the disk cache is off (TESSERA_CACHE=0)");
  return *c;
}

double age_seconds(std::filesystem::file_time_type t) {
  return std::chrono::duration<double>(std::filesystem::file_time_type::clock::now() - t).count();
}

int list(bool json) {
  const auto entries = cache().list();
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& e : entries)
      j.push_back({{"key", e.key},
                   {"name", e.name},
                   {"kind", e.kind},
                   {"bytes", e.bytes},
                   {"unused_s", age_seconds(e.last_used)},
                   {"path", e.path.string()}});
    std::cout << j.dump() << "\n";
    return kOk;
  }
  std::cout << fmt::format("{:<5} {:>9} {:>10}  {}\n", "kind", "bytes", "unused s", "name");
  for (const auto& e : entries)
    std::cout << fmt::format("{:<5} {:>9} {:>10.0f}  {}\n", e.kind, e.bytes, age_seconds(e.last_used), e.name);
  return kOk;
}

int stats(bool json) {
  const DiskCache& c = cache();
  std::uint64_t bytes = 0;
  std::map<std::string, int> kinds;
  const auto entries = c.list();
  for (const auto& e : entries) bytes += e.bytes, ++kinds[e.kind];
  if (json) {
    std::cout << nlohmann::json{{"dir", c.dir().string()}, {"entries", entries.size()},
                                {"bytes", bytes},          {"max_bytes", c.max_bytes()},
                                {"kinds", kinds},          {"writable", c.writable()},
                                {"warning", c.warning()}}
                     .dump()
              << "\n";
    return kOk;
  }
  std::cout << fmt::format("{}\n  {} entries, {:.1f} MiB of {:.0f} MiB", c.dir().string(), entries.size(),
                           static_cast<double>(bytes) / (1 << 20), static_cast<double>(c.max_bytes()) / (1 << 20));
  for (const auto& [kind, count] : kinds) std::cout << fmt::format(", {} {}", count, kind);
  std::cout << "\n";
  if (!c.writable()) std::cout << "  " << c.warning() << "\n";
  return kOk;
}

int verify() {
  const DiskCacheVerify v = cache().verify();
  for (const auto& p : v.problems) std::cout << "removed " << p << "\n";
  std::cout << fmt::format("{} intact, {} removed\n", v.intact, v.removed);
  return v.removed ? kVerifyFailed : kOk;
}

int clear() {
  const int removed = cache().clear();
  // The emulator's host libraries, kept beside the kernels, are rebuilt as needed too.
  std::error_code ignored;
  std::filesystem::remove_all(cache().dir().parent_path() / "emu", ignored);
  std::cout << fmt::format("removed {} entries from {}\n", removed, cache().dir().string());
  return kOk;
}

}  // namespace

void add_cache_command(CLI::App& app, int& result) {
  CLI::App* cmd = app.add_subcommand("cache", "list, check or clear the disk cache of compiled kernels");
  cmd->require_subcommand(1);
  auto json = std::make_shared<bool>(false);
  CLI::App* l = cmd->add_subcommand("list", "the cached kernels, most recently used first");
  l->add_flag("--json", *json, "print JSON");
  l->callback([json, &result] { result = guarded([&] { return list(*json); }); });
  CLI::App* s = cmd->add_subcommand("stats", "where the cache is, its size and its cap");
  s->add_flag("--json", *json, "print JSON");
  s->callback([json, &result] { result = guarded([&] { return stats(*json); }); });
  cmd->add_subcommand("verify", "check every entry's checksum, removing damaged ones (exit 1 if any)")
      ->callback([&result] { result = guarded(verify); });
  cmd->add_subcommand("clear", "remove every entry")->callback([&result] { result = guarded(clear); });
}

}  // namespace tessera::cli
