#include "jit/nvrtc.hpp"

#include <fmt/format.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <string_view>

#include <nlohmann/json.hpp>
#include "generator/core/error.hpp"
#include "jit/disk_cache.hpp"
#include "jit/embedded_templates.hpp"
#include "jit/shared_library.hpp"

namespace tessera {

// NVRTC's C API, declared here so that tessera builds without the toolkit's headers (outside the anonymous namespace:
// Nvrtc::Api's fields have these types, and a unity build would give the class fields of internal linkage).
using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

namespace {

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

int count_occurrences(const std::string& text, const std::string& needle) {
  int count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++count;
  return count;
}
}  // namespace

struct Nvrtc::Api {
  SharedLibrary library;
  const char* (*get_error_string)(nvrtcResult);
  nvrtcResult (*version)(int*, int*);
  nvrtcResult (*create_program)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*);
  nvrtcResult (*destroy_program)(nvrtcProgram*);
  nvrtcResult (*compile_program)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*get_ptx_size)(nvrtcProgram, std::size_t*);
  nvrtcResult (*get_ptx)(nvrtcProgram, char*);
  nvrtcResult (*get_cubin_size)(nvrtcProgram, std::size_t*);
  nvrtcResult (*get_cubin)(nvrtcProgram, char*);
  nvrtcResult (*get_log_size)(nvrtcProgram, std::size_t*);
  nvrtcResult (*get_log)(nvrtcProgram, char*);

  explicit Api(SharedLibrary lib) : library(std::move(lib)) {
    get_error_string = library.get<decltype(get_error_string)>("nvrtcGetErrorString");
    version = library.get<decltype(version)>("nvrtcVersion");
    create_program = library.get<decltype(create_program)>("nvrtcCreateProgram");
    destroy_program = library.get<decltype(destroy_program)>("nvrtcDestroyProgram");
    compile_program = library.get<decltype(compile_program)>("nvrtcCompileProgram");
    get_ptx_size = library.get<decltype(get_ptx_size)>("nvrtcGetPTXSize");
    get_ptx = library.get<decltype(get_ptx)>("nvrtcGetPTX");
    get_cubin_size = library.get<decltype(get_cubin_size)>("nvrtcGetCUBINSize");
    get_cubin = library.get<decltype(get_cubin)>("nvrtcGetCUBIN");
    get_log_size = library.get<decltype(get_log_size)>("nvrtcGetProgramLogSize");
    get_log = library.get<decltype(get_log)>("nvrtcGetProgramLog");
  }

  void check(nvrtcResult result, const char* call) const {
    if (result != 0) throw CompileError(fmt::format("nvrtc: {} failed: {}", call, get_error_string(result)));
  }
};

Nvrtc::Nvrtc() {
  std::vector<std::string> candidates{env_or_empty("TESSERA_NVRTC"), "libnvrtc.so.13", "libnvrtc.so"};
  for (const std::string& root : {env_or_empty("CUDA_HOME"), std::string("/usr/local/cuda")})
    if (!root.empty()) candidates.push_back(root + "/lib64/libnvrtc.so.13");
  api_ = new Api(SharedLibrary::open("NVRTC", candidates));
}

Nvrtc::~Nvrtc() { delete api_; }

const Nvrtc& Nvrtc::instance() {
  // A failed load is remembered: asking again gives the same reason without retrying dlopen.
  static const auto loaded = []() -> std::pair<Nvrtc*, std::string> {
    try {
      return {new Nvrtc(), ""};
    } catch (const Unavailable& e) {
      return {nullptr, e.what()};
    }
  }();
  if (!loaded.first) throw Unavailable(loaded.second);
  return *loaded.first;
}

std::string Nvrtc::version() const {
  int major = 0, minor = 0;
  api_->check(api_->version(&major, &minor), "nvrtcVersion");
  return fmt::format("{}.{}", major, minor);
}

namespace {

// A build as disk cache bytes: the PTX, CUBIN and log, each length-prefixed (the resources are parsed from the log).
std::string serialise(const CudaBinary& b) {
  std::string out;
  const auto put = [&](const char* data, std::uint64_t size) {
    out.append(reinterpret_cast<const char*>(&size), sizeof size);
    out.append(data, size);
  };
  put(b.ptx.data(), b.ptx.size());
  put(b.cubin.data(), b.cubin.size());
  put(b.log.data(), b.log.size());
  return out;
}

std::optional<CudaBinary> deserialise(const std::string& bytes) {
  std::size_t at = 0;
  const auto take = [&](std::string& into) {
    std::uint64_t size = 0;
    if (bytes.size() - at < sizeof size) return false;
    std::memcpy(&size, bytes.data() + at, sizeof size);
    at += sizeof size;
    if (bytes.size() - at < size) return false;
    into.assign(bytes.data() + at, size);
    at += size;
    return true;
  };
  CudaBinary b;
  std::string cubin;
  if (!take(b.ptx) || !take(cubin) || !take(b.log) || at != bytes.size()) return std::nullopt;
  b.cubin.assign(cubin.begin(), cubin.end());
  if (!b.cubin.empty()) b.resources = parse_ptxas_report(b.log);
  return b;
}

}  // namespace

CudaBinary Nvrtc::compile(const std::string& source, const std::string& name, const CudaTarget& target,
                          bool cubin) const {
  // Kept on disk between processes (NVRTC takes 100+ ms a kernel): keyed by everything the build reads.
  const auto start = std::chrono::steady_clock::now();
  const DiskCache* disk = DiskCache::process_cache();
  const Hash128 key =
      hash_text(fmt::format("cuda-binary|{}|{}|{}|{}|{}|{}|{}|{}", name, target.arch(), cubin, version(),
                            embedded_templates_hash().hex(), TESSERA_VERSION, generator_fingerprint(), source));
  if (disk && environment("TESSERA_DUMP").empty())
    if (auto bytes = disk->load(key))
      if (auto binary = deserialise(*bytes)) {
        binary->from_disk = true;
        binary->compile_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        return *binary;
      }
  CudaBinary binary = compile_uncached(source, name, target, cubin);
  if (const std::string dir = environment("TESSERA_DUMP"); !dir.empty()) {
    dump_file(dir, name + "_" + target.arch() + ".cu", source);
    dump_file(dir, name + "_" + target.arch() + ".ptx", binary.ptx);
  }
  if (disk) disk->store(key, name, "cuda", serialise(binary));
  return binary;
}

CudaBinary Nvrtc::compile_uncached(const std::string& source, const std::string& name, const CudaTarget& target,
                                   bool cubin) const {
  const auto start = std::chrono::steady_clock::now();
  std::vector<const char*> header_texts, header_names;
  std::vector<std::string> storage;  // string_views of the table are not NUL-terminated
  storage.reserve(2 * embedded_templates().size());
  for (const auto& file : embedded_templates()) {
    storage.emplace_back(file.text);
    header_texts.push_back(storage.back().c_str());
    storage.emplace_back(file.path);
    header_names.push_back(storage.back().c_str());
  }
  nvrtcProgram program = nullptr;
  api_->check(api_->create_program(&program, source.c_str(), (name + ".cu").c_str(),
                                   static_cast<int>(header_texts.size()), header_texts.data(), header_names.data()),
              "nvrtcCreateProgram");
  struct Destroy {
    const Api* api;
    nvrtcProgram* program;
    ~Destroy() { api->destroy_program(program); }
  } destroy{api_, &program};

  // A real architecture (sm_XX) yields both PTX and CUBIN; a virtual one (compute_XX) only PTX.
  const std::string arch = "--gpu-architecture=" + (cubin ? target.arch() : "compute_" + target.arch().substr(3));
  std::vector<const char*> options{arch.c_str(), "-std=c++17", "-DNDEBUG"};
  if (cubin) options.push_back("--ptxas-options=-v");
  const nvrtcResult compiled = api_->compile_program(program, static_cast<int>(options.size()), options.data());

  CudaBinary binary;
  std::size_t size = 0;
  api_->check(api_->get_log_size(program, &size), "nvrtcGetProgramLogSize");
  binary.log.resize(size);
  if (size) api_->check(api_->get_log(program, binary.log.data()), "nvrtcGetProgramLog");
  while (!binary.log.empty() && (binary.log.back() == '\0' || binary.log.back() == '\n')) binary.log.pop_back();
  if (compiled != 0)
    throw CompileError(
        fmt::format("nvrtc: {} for {}: {}\n{}", name, target.arch(), api_->get_error_string(compiled), binary.log));
  api_->check(api_->get_ptx_size(program, &size), "nvrtcGetPTXSize");
  binary.ptx.resize(size);
  api_->check(api_->get_ptx(program, binary.ptx.data()), "nvrtcGetPTX");
  while (!binary.ptx.empty() && binary.ptx.back() == '\0') binary.ptx.pop_back();
  if (cubin) {
    api_->check(api_->get_cubin_size(program, &size), "nvrtcGetCUBINSize");
    binary.cubin.resize(size);
    api_->check(api_->get_cubin(program, binary.cubin.data()), "nvrtcGetCUBIN");
    binary.resources = parse_ptxas_report(binary.log);
  }
  binary.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return binary;
}

namespace {
// The identifier right after `prefix` in `line`, or "" (plain string scanning: <regex> pulled a GCC 12
// -Wmaybe-uninitialized into sanitizer builds).
std::string identifier_after(const std::string& line, std::string_view prefix) {
  const auto at = line.find(prefix);
  if (at == std::string::npos) return {};
  std::size_t end = at + prefix.size();
  while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) || line[end] == '_')) ++end;
  return line.substr(at + prefix.size(), end - at - prefix.size());
}

// The decimal number that ends right before `suffix` in `line`, or -1.
int number_before(const std::string& line, std::string_view suffix) {
  const auto at = line.find(suffix);
  if (at == std::string::npos) return -1;
  std::size_t begin = at;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
  return begin == at ? -1 : std::stoi(line.substr(begin, at - begin));
}
}  // namespace

std::map<std::string, KernelResources> parse_ptxas_report(const std::string& log) {
  std::map<std::string, KernelResources> kernels;
  std::string current;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    std::string name = identifier_after(line, "Compiling entry function '");
    if (name.empty()) name = identifier_after(line, "Function properties for ");
    if (!name.empty()) {
      current = name;
      kernels[current];
      continue;
    }
    if (current.empty()) continue;
    KernelResources& r = kernels[current];
    const auto set = [&](int& field, std::string_view suffix) {
      if (const int n = number_before(line, suffix); n >= 0) field = n;
    };
    set(r.stack_bytes, " bytes stack frame");
    set(r.spill_store_bytes, " bytes spill stores");
    set(r.spill_load_bytes, " bytes spill loads");
    set(r.registers, " registers");
    set(r.static_shared_bytes, " bytes smem");
    set(r.constant_bytes, " bytes cmem[0]");
  }
  return kernels;
}

PtxCounts count_ptx(const std::string& ptx) {
  PtxCounts c;
  c.mma = count_occurrences(ptx, "mma.sync.aligned.");
  c.ldmatrix = count_occurrences(ptx, "ldmatrix.sync.aligned.");
  c.cp_async =
      count_occurrences(ptx, "cp.async.cg.shared.global") + count_occurrences(ptx, "cp.async.ca.shared.global");
  c.cp_async_wait = count_occurrences(ptx, "cp.async.wait_group");
  c.wgmma = count_occurrences(ptx, "wgmma.mma_async.");
  c.tma = count_occurrences(ptx, "cp.async.bulk.tensor.");
  c.local_access = count_occurrences(ptx, "ld.local.") + count_occurrences(ptx, "st.local.");

  std::vector<std::string_view> lines;
  for (std::size_t at = 0; at < ptx.size();) {
    std::size_t end = ptx.find('\n', at);
    if (end == std::string::npos) end = ptx.size();
    std::string_view line(ptx.data() + at, end - at);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    lines.push_back(line);
    at = end + 1;
  }
  std::map<std::string_view, std::size_t> labels;
  std::size_t best_begin = 0, best_end = 0;
  int best_mma = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (!line.empty() && line.back() == ':') {
      labels[line.substr(0, line.size() - 1)] = i;
      continue;
    }
    const std::size_t bra = line.find("bra");
    if (bra == std::string_view::npos || (bra > 0 && line[bra - 1] != ' ' && line[bra - 1] != '\t')) continue;
    std::string_view target = line.substr(bra + 3);
    if (target.starts_with(".uni")) target.remove_prefix(4);
    while (!target.empty() && (target.front() == ' ' || target.front() == '\t')) target.remove_prefix(1);
    if (const std::size_t semi = target.find(';'); semi != std::string_view::npos) target = target.substr(0, semi);
    const auto label = labels.find(target);
    if (label == labels.end()) continue;  // a forward branch
    int mma = 0;
    for (std::size_t j = label->second; j < i; ++j) mma += lines[j].starts_with("mma.sync.aligned.") ? 1 : 0;
    if (mma > best_mma || (mma == best_mma && mma > 0 && i - label->second < best_end - best_begin))
      best_mma = mma, best_begin = label->second, best_end = i;
  }
  c.main_loop_mma = best_mma;
  if (best_mma > 0)
    for (std::size_t j = best_begin; j <= best_end; ++j) {
      const std::string_view line = lines[j];
      if (line.starts_with("{") && line.ends_with("}")) {
        // An inline-assembly block on one line: each of its statements issues, its register declarations do not.
        for (std::size_t at = 1; at < line.size();) {
          std::size_t semi = line.find(';', at);
          if (semi == std::string_view::npos) break;
          std::string_view statement = line.substr(at, semi - at);
          while (!statement.empty() && statement.front() == ' ') statement.remove_prefix(1);
          if (!statement.empty() && statement.front() != '.' && !statement.starts_with("mma.sync.aligned."))
            ++c.main_loop_other;
          at = semi + 1;
        }
        continue;
      }
      const bool instruction = !line.empty() && line.back() == ';' && line.front() != '.' && !line.starts_with("//");
      if (instruction && !line.starts_with("mma.sync.aligned.")) ++c.main_loop_other;
    }
  return c;
}

nlohmann::json kernel_report(const std::string& name, const CudaTarget& target, int threads,
                             std::int64_t dynamic_shared, const CudaBinary& binary) {
  KernelResources r;
  if (auto it = binary.resources.find(name); it != binary.resources.end()) r = it->second;
  const PtxCounts ptx = count_ptx(binary.ptx);
  return {{"name", name},
          {"arch", target.arch()},
          {"target", target.str()},
          {"threads", threads},
          {"registers", r.registers},
          {"shared_bytes", dynamic_shared + r.static_shared_bytes},
          {"dynamic_shared_bytes", dynamic_shared},
          {"static_shared_bytes", r.static_shared_bytes},
          {"spill_store_bytes", r.spill_store_bytes},
          {"spill_load_bytes", r.spill_load_bytes},
          {"stack_bytes", r.stack_bytes},
          {"compile_ms", binary.compile_ms},
          {"cubin_bytes", binary.cubin.size()},
          {"mma_count", ptx.mma},
          {"ldmatrix_count", ptx.ldmatrix},
          {"cp_async_count", ptx.cp_async},
          {"cp_async_wait_count", ptx.cp_async_wait},
          {"wgmma_count", ptx.wgmma},
          {"tma_count", ptx.tma},
          {"local_access_count", ptx.local_access},
          {"main_loop_mma", ptx.main_loop_mma},
          {"main_loop_other", ptx.main_loop_other}};
}

}  // namespace tessera
