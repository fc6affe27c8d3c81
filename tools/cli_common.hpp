// Shared pieces of the tessera command: GEMM requests with owned random buffers, timing, errors.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <iostream>

#include "generator/gemm/gemm_json.hpp"
#include "tessera/cuda.hpp"
#include "tessera/reference.hpp"
#include "tessera/tessera.hpp"
#include "tessera/tuning_records.hpp"

namespace tessera::cli {

// Exit codes: 0 success, 1 verification failed, 2 bad arguments, 3 tessera could not do it here.
enum Exit : int { kOk = 0, kVerifyFailed = 1, kBadArguments = 2, kUnavailable = 3 };

struct GemmRequest {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  std::string layout_a = "row", layout_b = "row", layout_c = "row";
  float alpha = 1, beta = 0;
  std::string epilogue;
  bool epilogue_given = false;  // --epilogue was given (an empty text is then an error, as in the API)
  int threads = 0;
  std::string target = "cpu";
  int ir_opt_level = 0;
  std::string config;             // overrides of the default config, "mr=8,pack_a=0"
  std::string dtype = "f32";      // of A and B: f32, bf16 or i8 (CPU), f32, tf32, f16 or bf16 (CUDA)
  std::string out_dtype = "f32";  // of D (CPU): f32, bf16, or u8 / i8 (requantised)
};

// Adds M N K and the GEMM options shared by `gemm` and `emit gemm`.
void add_gemm_options(CLI::App& app, GemmRequest& request);

// Buffers for every operand the request needs, filled with random values, and the GemmArgs viewing them.
struct GemmBuffers {
  std::vector<float> a, b, c, d;
  std::vector<std::uint16_t> a16, b16;  // A and B when they are bf16 or f16
  std::vector<std::uint8_t> a8;         // u8 A and i8 B of an int8 GEMM (--dtype i8)
  std::vector<std::uint16_t> d_narrow;  // D when --out-dtype is not f32 (bytes for u8 / i8)
  std::vector<std::int8_t> b8;
  std::map<std::string, std::vector<float>> inputs;
  GemmArgs args;
};
GemmBuffers make_gemm_buffers(const GemmRequest& request, std::uint32_t seed = 42);

// The problem a request describes for a CUDA target (no host buffers): --dtype f32, tf32, f16 or bf16 for A and B,
// D f32.
GemmProblem cuda_problem(const GemmRequest& request);

// One request carried out: compiled (then requested again to time a cache hit), timed, and optionally verified.
struct GemmRun {
  GemmProblem problem;
  CpuGemmSpec spec;
  double compile_ms = 0, cache_hit_us = 0, median_ms = 0, gflops = 0;
  std::string origin;  // where the kernel came from: "built" or "disk"
  bool verified = false;
  Comparison comparison;
  bool ok() const { return !verified || comparison.ok(); }
};
GemmRun run_gemm(Runtime& runtime, const GemmRequest& request, int repeat, bool verify);

// Median wall time of `repeat` calls in milliseconds, after one warm-up call.
double median_ms(int repeat, const std::function<void()>& fn);

// Host buffers copied to device memory it owns (host memory in the emulator), for the commands' CUDA paths.
class DeviceMirror {
 public:
  explicit DeviceMirror(const CudaRuntime& runtime) : runtime_(runtime) {}
  // Copies a host vector to new device memory and points `t` at it; returns the copy's index for fetch().
  template <class V>
  std::size_t add(Tensor& t, const V& host) {
    return add(t, host.data(), host.size() * sizeof(host[0]));
  }
  std::size_t add(Tensor& t, const void* data, std::size_t bytes);
  // Copies copy `index` back into the host vector it came from.
  template <class V>
  void fetch(std::size_t index, V& host) const {
    buffers_.at(index).copy_to_host(host.data(), host.size() * sizeof(host[0]));
  }

 private:
  const CudaRuntime& runtime_;
  std::vector<DeviceBuffer> buffers_;
};

// Runs a subcommand body, turning tessera errors into a one-line message and an exit code.
int guarded(const std::function<int()>& body);

// The SIMT emulator's access counts (`--profile` of cuda-emu targets), per kind: requests, wavefronts (shared) or
// sectors (global) and the ideal, per request; shared kinds add their bank conflicts. As JSON and as a table.
nlohmann::json profile_json(const EmuProfile& profile);
void print_profile(const EmuProfile& profile);
// Prints "tessera: error: MESSAGE" on stderr (and, after report_errors_as_json(true), {"ok": false, "error", "exit"}
// on stdout); returns code.
int report_error(const std::string& message, int code);
// `--records DB` (tuning records to resume from and record into) and `--family NAME` (recorded with each
// measurement).
void add_records_options(CLI::App& app, std::string& records_path, std::string& family);
// The records at `path`, opened to be written, or null for an empty path.
std::unique_ptr<TuningRecords> open_records(const std::string& path);
void report_errors_as_json(bool on);

// Prints a tuner's measurements (attention's or a sparse op's: each with config, spec_hash, median_ns, spread and
// predicted_cycles) as one JSON object or a table, GFLOP/s from `flops` per call.
template <class Result>
int print_tune_result(const Result& r, double flops, bool json) {
  if (json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& m : r.measured)
      rows.push_back({{"config", to_json(m.config)},
                      {"spec_hash", m.spec_hash},
                      {"median_ns", m.median_ns},
                      {"spread", m.spread},
                      {"gflops", flops / m.median_ns},
                      {"predicted_cycles", m.predicted_cycles},
                      {"from_records", m.from_records}});
    std::cout << nlohmann::json{{"space", r.space}, {"best", r.best}, {"measured", rows}}.dump() << "\n";
    return kOk;
  }
  std::size_t on_record = 0;
  for (const auto& m : r.measured) on_record += m.from_records;
  std::cout << fmt::format("{} variants, {} measured (default first, then the analytic order), {} new\n", r.space,
                           r.measured.size(), r.measured.size() - on_record);
  for (std::size_t i = 0; i < r.measured.size(); ++i) {
    const auto& m = r.measured[i];
    std::cout << fmt::format("{} {:<60} {:>10.1f} us {:>7.1f} GFLOP/s  {}\n", i == r.best ? "*" : " ",
                             to_json(m.config).dump(), m.median_ns / 1e3, flops / m.median_ns,
                             m.from_records ? "on record" : fmt::format("spread {:.3f}", m.spread));
  }
  return kOk;
}

}  // namespace tessera::cli
