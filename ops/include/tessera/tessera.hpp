// tessera's public C++ API: a Runtime that JIT-compiles, caches and runs GEMM, attention and sparse kernels
// described by their parts.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "generator/core/cpu_target.hpp"
#include "generator/core/epilogue.hpp"
#include "generator/core/error.hpp"
#include "generator/gemm/cpu_gemm_config.hpp"
#include "generator/gemm/cpu_gemm_spec.hpp"
#include "generator/gemm/gemm_problem.hpp"
#include "tessera/attention.hpp"
#include "tessera/sparse.hpp"
#include "tessera/tensor.hpp"

namespace tessera {

// D[b] = epilogue(A[b]·B[b], C[b], inputs...) for b < batch. A is M×K, B is K×N, C and D are M×N; 2-D operands
// are shared by every batch. C is not read when the epilogue does not name c, or when beta = 0 and c only
// appears as beta*c (the BLAS convention, so NaNs in C do not leak).
struct GemmArgs {
  Tensor a, b, c, d;
  float alpha = 1, beta = 0;
  Epilogue epilogue = Epilogue::linear_combination();
  std::map<std::string, Tensor> inputs;  // the tensors the epilogue names: bias[n] → inputs["bias"]
  int threads = 0;                       // 0: every thread of the runtime's pool

  GemmArgs& set_epilogue(std::string_view text) {
    epilogue = Epilogue::parse(text);
    return *this;
  }
};

// How a Runtime's kernel cache has answered: lookups found, lookups that built, builds done and builds that failed.
struct CacheStats {
  std::uint64_t hits = 0, misses = 0, builds = 0, failures = 0;
};

struct RuntimeOptions {
  std::string target = "cpu";  // "cpu" (the host's best ISA), "cpu:avx512", "cpu:avx2"
  int threads = 0;             // pool size; 0: one per hardware thread
  int ir_opt_level = 0;        // LLVM IR pipeline before the backend: 0 (none, the default), 2 or 3
  // Keep compiled CPU kernels on disk and take them from there in later processes: in cache_dir, or where empty in
  // $TESSERA_CACHE_DIR/kernels (TESSERA_CACHE=0 turns that one off; TESSERA_CACHE_MAX_MB caps both, default 1024).
  bool disk_cache = true;
  std::string cache_dir = {};
  // Move pool workers, per call, to CPUs other than the caller's (a woken worker otherwise may share the caller's
  // CPU until the scheduler moves it). Turn off when the application manages thread placement itself.
  bool pin_workers = true;
  // How compile(problem) picks a config among the problem's variants: "default" (the learned model shipped for this
  // CPU target; where none was trained, default_for's config first and the analytic model's order after it),
  // "analytic", "heuristic" (CpuGemmConfig::default_for's rules, no ranking) or the path of a model file (`tessera
  // model train`).
  std::string cost_model = "default";
  // Variants to compile and time the first time a shape is seen, best-ranked first; the fastest is kept for the
  // shape (0: the model's top choice, untimed). SpMM and SDDMM are timed on the call's own pattern and keep the
  // choice per signature, shape and pattern statistics.
  int tuning_budget = 0;
};

class Runtime;

// Validates GEMM arguments and states the problem they describe (shapes, layouts, epilogue inputs).
GemmProblem describe_gemm(const GemmArgs& args);

// The code generated for a CPU GEMM spec: its LLVM IR (after the IR pipeline of `ir_opt_level`: 0, 2 or 3), or the
// host assembly the JIT would run. Validates the spec first.
std::string gemm_llvm_ir(const CpuGemmSpec& spec, int ir_opt_level = 0);
std::string gemm_host_assembly(const CpuGemmSpec& spec, int ir_opt_level = 0);

class GemmKernel;
struct GemmBinding;

// A call validated and planned once, to be run many times on the same buffers (their contents may change, their
// addresses, shapes and strides may not). It skips the per-call validation, which for tiny GEMMs costs more than the
// multiplication. It keeps its kernel and runtime alive.
class PreparedGemm {
 public:
  void run() const;

 private:
  friend class GemmKernel;
  struct State;
  explicit PreparedGemm(std::shared_ptr<const State> state);
  std::shared_ptr<const State> state_;
};

// A compiled kernel for one signature; it runs any sizes whose arguments match that signature.
class GemmKernel {
 public:
  const CpuGemmSpec& spec() const;
  std::string name() const { return spec().name(); }
  double compile_ms() const;
  // How the kernel was obtained when first asked for: "built" (compiled by this process) or "disk" (its object code
  // from the disk cache).
  const char* origin() const;
  void run(const GemmArgs& args) const;
  // Validates and plans the call once; PreparedGemm::run repeats it.
  PreparedGemm prepare(const GemmArgs& args) const;

 private:
  friend class Runtime;
  friend class PreparedGemm;
  struct Compiled;
  GemmKernel(std::shared_ptr<const Compiled> compiled, std::shared_ptr<void> runtime);
  void run_bound(GemmBinding&& bound, int threads) const;
  struct Planned;
  static void plan(const Compiled& compiled, const void* runtime, GemmBinding&& bound, int threads, Planned& out);
  static void run_planned(const Compiled& compiled, void* runtime, const Planned& call);
  std::shared_ptr<const Compiled> compiled_;
  std::shared_ptr<void> runtime_;  // keeps the JIT session and the pool alive
};

class Runtime {
 public:
  explicit Runtime(RuntimeOptions options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const CpuTarget& target() const;
  int threads() const;

  GemmProblem describe(const GemmArgs& args) const { return describe_gemm(args); }
  // A kernel for the problem: the config the cost model (or a timed tuning budget) chose for its shape, from the
  // cache or compiled now. The choice is remembered per shape.
  GemmKernel compile(const GemmProblem& problem);
  // The config compile(problem) uses.
  CpuGemmConfig choose_config(const GemmProblem& problem);
  // That config and the path that picked it: "model:NAME" (the cost model ranked the variant space), "rules"
  // (default_for: no model, or the problem outside the model's training range) or "tuner" (a tuning budget).
  // b_cold: ranked for B arriving cold (a few rows times a B beyond L2: a layer's weights read once per step).
  struct GemmChoice {
    CpuGemmConfig config;
    std::string path;
    bool b_cold = false;
  };
  GemmChoice choice(const GemmProblem& problem);
  GemmKernel compile(const GemmProblem& problem, const CpuGemmConfig& config);
  // describe + compile + run.
  void gemm(const GemmArgs& args);

  AttentionProblem describe(const AttentionArgs& args) const { return describe_attention(args); }
  // An attention kernel for the problem, from the cache or compiled now: default_for's config, or with a tuning
  // budget the fastest of that many variants timed the first time the shape is seen.
  AttentionKernel compile(const AttentionProblem& problem);
  CpuAttentionConfig choose_config(const AttentionProblem& problem);
  AttentionKernel compile(const AttentionProblem& problem, const CpuAttentionConfig& config);
  // describe + compile + run.
  void attention(const AttentionArgs& args);

  // Sparse × dense (SpMM) and the sampled dense product (SDDMM): kernels from the cache or compiled now, with
  // default_for's config (or the one given). spmm / sddmm inspect the pattern unless the args carry its plan; spmm
  // runs a CSR pattern whose entries cluster into blocks as BSR (SparsePlan::blocked).
  SpmmProblem describe(const SpmmArgs& args) const { return describe_spmm(args); }
  CpuSpmmConfig choose_config(const SpmmProblem& problem);
  SpmmKernel compile(const SpmmProblem& problem);
  SpmmKernel compile(const SpmmProblem& problem, const CpuSpmmConfig& config);
  void spmm(const SpmmArgs& args);
  SddmmProblem describe(const SddmmArgs& args) const { return describe_sddmm(args); }
  CpuSddmmConfig choose_config(const SddmmProblem& problem);
  SddmmKernel compile(const SddmmProblem& problem);
  SddmmKernel compile(const SddmmProblem& problem, const CpuSddmmConfig& config);
  void sddmm(const SddmmArgs& args);

  CacheStats cache_stats() const;

 private:
  friend class GemmKernel;
  friend class PreparedGemm;
  friend class AttentionKernel;
  friend class SpmmKernel;
  friend class SddmmKernel;
  struct Impl;
  std::shared_ptr<Impl> impl_;
  // compile(problem, config) with how the config was chosen, for TESSERA_VERBOSE.
  GemmKernel compile_chosen(const GemmProblem& problem, const CpuGemmConfig& config, const std::string& path);
};

}  // namespace tessera
