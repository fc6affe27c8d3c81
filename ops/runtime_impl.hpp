// The Runtime's shared state: target, JIT session, kernel cache, worker pool, cost model and the configs chosen per
// shape (kept alive by its kernels).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

#include "generator/attention/attention_abi.hpp"
#include "generator/cost/cost_model.hpp"
#include "generator/gemm/gemm_abi.hpp"
#include "generator/sparse/sparse_abi.hpp"
#include "jit/disk_cache.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/orc_session.hpp"
#include "jit/thread_pool.hpp"
#include "tessera/tessera.hpp"

namespace tessera {

struct GemmKernel::Compiled {
  CpuGemmSpec spec;
  GemmKernelFn fn = nullptr;
  double compile_ms = 0;
  KernelOrigin origin = KernelOrigin::built;
};

// TESSERA_VERBOSE lines: a problem's shape, types and epilogue; a kernel obtained for a problem.
std::string describe_shape(const GemmProblem& problem);
void log_gemm(const GemmProblem& problem, const GemmKernel& kernel, const std::string& path, const char* cache,
              double ms);
// "tessera: OP,kernel,PROBLEM,NAME,choice=PATH,cache=built|disk|memory,compile_ms=MS" on stderr.
void log_kernel(const char* op, const std::string& problem, const std::string& name, const std::string& path,
                const char* cache, double ms);

// The IR pipeline level, checked: 0, 2 or 3.
int checked_ir_opt_level(int level);

// Runs task(t, scratch) for t < tasks on up to `participants` threads of the pool (the caller alone for one).
void run_tasks(ThreadPool& pool, int participants, std::int64_t tasks, std::size_t scratch_bytes,
               const ThreadPool::Task& task);

struct AttentionKernel::Compiled {
  CpuAttentionSpec spec;
  AttentionKernelFn fn = nullptr;
  AttentionPackFn pack = nullptr;
  double compile_ms = 0;
  KernelOrigin origin = KernelOrigin::built;
};

struct SpmmKernel::Compiled {
  CpuSpmmSpec spec;
  SpmmKernelFn fn = nullptr;
  double compile_ms = 0;
  KernelOrigin origin = KernelOrigin::built;
};

struct SddmmKernel::Compiled {
  CpuSddmmSpec spec;
  SddmmKernelFn fn = nullptr;
  double compile_ms = 0;
  KernelOrigin origin = KernelOrigin::built;
};

struct Runtime::Impl {
  explicit Impl(const RuntimeOptions& options);

  RuntimeOptions options;
  CpuTarget target;
  int threads;
  std::unique_ptr<DiskCache> own_disk_cache;  // options.cache_dir's; else the process's is used
  OrcSession orc;
  ThreadPool pool;
  KernelCache<GemmKernel::Compiled> cache;
  KernelCache<AttentionKernel::Compiled> attention_cache;
  KernelCache<SpmmKernel::Compiled> spmm_cache;
  KernelCache<SddmmKernel::Compiled> sddmm_cache;
  std::shared_ptr<const CpuCostModel> cost_model;  // null: default_for's rules
  std::mutex choices_mutex;
  // Per shape: the config compile(problem) uses and how it was chosen ("tuner", "model:NAME", "rules").
  using GemmChoice = Runtime::GemmChoice;
  std::map<std::string, GemmChoice> choices;
  // TESSERA_VERBOSE: 1 logs each new kernel request (shape, kernel, how it was chosen, where it came from, compile
  // time) on stderr, 2 every GEMM call with its run time too.
  int verbose = 0;
  // Whether a kernel obtained now is logged: TESSERA_VERBOSE=1 when it was built (or read from disk), 2 always.
  bool logs(bool built_now) const { return verbose >= 2 || (verbose >= 1 && built_now); }
  // The verbose line of an attention or sparse kernel obtained (`describe` and `default_config` run only when it is
  // logged, not on every call): how its config was chosen — default_for's ("rules"), a tuning budget's or the caller's
  // own — and where the kernel came from.
  void log_obtained(const char* op, const std::function<std::string()>& describe, const std::string& name,
                    const std::function<bool()>& default_config, bool built_now, const char* origin,
                    std::chrono::steady_clock::time_point requested) const {
    if (!logs(built_now)) return;
    log_kernel(op, describe(), name,
               default_config()            ? "rules"
               : options.tuning_budget > 0 ? "tuner"
                                           : "given",
               built_now ? origin : "memory",
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - requested).count());
  }
  // The config for a problem and how it was chosen (Runtime::choose_config's body).
  GemmChoice choose(Runtime& runtime, const GemmProblem& problem);
  // compile(problem)'s answers by dispatch_key: a repeated call finds its kernel with one hash and one lookup.
  std::unordered_map<Hash128, std::shared_ptr<const GemmKernel::Compiled>, Hash128Hasher> dispatch;
  std::uint64_t dispatch_hits = 0;  // under choices_mutex; counted as cache hits
  std::map<std::string, CpuAttentionConfig> attention_choices;
  std::map<std::string, CpuSpmmConfig> spmm_choices;  // with a tuning budget: per signature, shape and pattern
  std::map<std::string, CpuSddmmConfig> sddmm_choices;

  // Threads a call of `requested` threads (0: all) runs on.
  int participants(int requested) const { return requested ? std::min(requested, threads) : threads; }
};

}  // namespace tessera
