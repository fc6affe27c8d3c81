// The Runtime's sparse operations: compiling SpMM and SDDMM kernels and running them over the inspector's tasks.
#include <fmt/format.h>

#include <chrono>
#include <cstring>

#include "generator/llvm/sparse_emitter.hpp"
#include "generator/sparse/sparse_json.hpp"
#include "ops/runtime_impl.hpp"
#include "ops/sparse/sparse_binding.hpp"
#include "tessera/tuner.hpp"

namespace tessera {

namespace {

template <class Signature>
void check_signature(const Signature& kernel, const Signature& args) {
  if (!(kernel == args))
    throw InvalidArgument("args", "describe a different signature than this kernel was compiled for:\n  kernel: " +
                                      to_json(kernel).dump() + "\n  args:   " + to_json(args).dump());
}

// Runs fn(args, rows of task t) over the plan's tasks.
template <class Args, class Fn>
void run_plan(ThreadPool& pool, int participants, const SparsePlan& plan, const Args& args, Fn fn) {
  const std::vector<std::int64_t>& splits = plan.splits();
  if (splits.size() < 2) return;
  run_tasks(pool, participants, static_cast<std::int64_t>(splits.size()) - 1, 0, [&](std::int64_t t, void*) {
    fn(&args, splits[static_cast<std::size_t>(t)], splits[static_cast<std::size_t>(t) + 1]);
  });
}

// B's columns [n0, n0 + width) copied into contiguous rows of `width` elements in `scratch`; the returned B is aimed
// so that the kernel's address of column n0 is the copy's first. A column panel read in place from B rows a power
// of two apart would fall into a few of the L2's sets.
TensorArg pack_column_panel(ThreadPool& pool, int participants, const TensorArg& b, std::int64_t rows, std::int64_t n0,
                            std::int64_t width, std::size_t element, std::vector<std::byte>& scratch) {
  const std::size_t row_bytes = static_cast<std::size_t>(width) * element;
  scratch.resize(static_cast<std::size_t>(rows) * row_bytes);
  constexpr std::int64_t kRowsPerTask = 256;
  const auto* source = static_cast<const std::byte*>(b.data);
  run_tasks(pool, participants, ceil_div(rows, kRowsPerTask), 0, [&](std::int64_t t, void*) {
    for (std::int64_t r = t * kRowsPerTask; r < std::min(rows, (t + 1) * kRowsPerTask); ++r)
      std::memcpy(scratch.data() + static_cast<std::size_t>(r) * row_bytes,
                  source + static_cast<std::size_t>((r * b.rs + n0)) * element, row_bytes);
  });
  TensorArg packed = b;
  packed.rs = width;
  packed.data = reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(scratch.data()) -
                                              static_cast<std::uintptr_t>(n0) * element);
  return packed;
}

// A packed panel of B is kept for the caller's next call, unless it is larger than this.
constexpr std::size_t kKeptPanelBytes = std::size_t{64} << 20;

// SpMM over D's column panels one after another (or all columns at once), each over A whole or over A's column
// panels one after another (partial sums kept in D between them).
void run_spmm(ThreadPool& pool, int participants, const SpmmBinding& bound, const CpuSpmmSpec& spec, SpmmKernelFn fn) {
  SpmmKernelArgs k = bound.kernel_args();
  const std::int64_t tile = std::int64_t{spec.config.nv} * spec.target.vector_lanes();
  const std::int64_t width =
      bound.column_panel > 0 ? ceil_div(bound.column_panel, tile) * tile : std::max<std::int64_t>(k.n, 1);
  thread_local std::vector<std::byte> b_panel;
  const std::size_t element = bound.problem.signature.dense.b.dtype == DType::bf16 ? 2 : 4;
  for (std::int64_t n0 = 0; n0 < k.n; n0 += width) {
    k.n_begin = n0;
    k.n_end = std::min(k.n, n0 + width);
    if (width < k.n) k.b = pack_column_panel(pool, participants, bound.args.b, k.k, n0, k.n_end - n0, element, b_panel);
    if (!bound.panels) {
      run_plan(pool, participants, *bound.plan, k, fn);
      continue;
    }
    const auto& panels = *bound.panels;
    std::vector<SpmmKernelArgs> panel_args(panels.size(), k);
    for (std::size_t t = 0; t < panels.size(); ++t) {
      const SparseMatrix panel = panels[t].view();
      SpmmKernelArgs& a = panel_args[t];
      a.row_offsets = panel.row_offsets;
      a.col_indices = panel.col_indices;
      a.values = panel.values;
      a.entries = panel.entries;
      a.accumulate = t > 0;
      a.finish = t + 1 == panels.size();
    }
    if (bound.panels_per_task) {
      const std::vector<std::int64_t>& splits = bound.plan->splits();
      if (splits.size() < 2) continue;
      run_tasks(pool, participants, static_cast<std::int64_t>(splits.size()) - 1, 0, [&](std::int64_t t, void*) {
        for (const SpmmKernelArgs& a : panel_args)
          fn(&a, splits[static_cast<std::size_t>(t)], splits[static_cast<std::size_t>(t) + 1]);
      });
      continue;
    }
    for (const SpmmKernelArgs& a : panel_args) run_plan(pool, participants, *bound.plan, a, fn);
  }
  if (b_panel.capacity() > kKeptPanelBytes) std::vector<std::byte>().swap(b_panel);
}

// SDDMM over K whole, or over K panels one after another: each pass's slice of B packed into rows of its own (B's
// rows are a power of two apart in the common case, and a slice read in place would fall into a few of the L2's sets)
// and its slice of A read in place, the partial sums kept in out between passes.
void run_sddmm(ThreadPool& pool, int participants, const SddmmBinding& bound, const CpuSddmmSpec& spec,
               SddmmKernelFn fn) {
  SddmmKernelArgs k = bound.kernel_args();
  const std::int64_t panel = spec.config.k_panel;
  if (panel == 0 || k.k <= panel) {
    k.accumulate = 0;
    k.finish = 1;
    run_plan(pool, participants, *bound.plan, k, fn);
    return;
  }
  thread_local std::vector<std::byte> b_panel;
  constexpr std::size_t element = 4;  // the binding widened A and B to f32
  for (std::int64_t k0 = 0; k0 < bound.args.k; k0 += panel) {
    k.k = std::min(panel, bound.args.k - k0);
    k.a.data = static_cast<const float*>(bound.args.a.data) + k0;
    k.b = pack_column_panel(pool, participants, bound.args.b, k.n, k0, k.k, element, b_panel);
    k.b.data = static_cast<const float*>(k.b.data) + k0;
    k.accumulate = k0 > 0;
    k.finish = k0 + panel >= bound.args.k;
    run_plan(pool, participants, *bound.plan, k, fn);
  }
  if (b_panel.capacity() > kKeptPanelBytes) std::vector<std::byte>().swap(b_panel);
}

// A sparse problem in a verbose line: "MxKxN" (SpMM; SDDMM: MxNxK), the format tag, the stored entries, the epilogue.
std::string sparse_shape(std::int64_t x, std::int64_t y, std::int64_t z, const SparseSignature& format,
                         const PatternStats& pattern, const Epilogue& epilogue) {
  return fmt::format("{}x{}x{},{},nnz={},epilogue={}", x, y, z, format.tag(), pattern.nnz, epilogue.text());
}

template <class Compiled, class Spec, class Source>
std::shared_ptr<const Compiled> build(OrcSession& orc, KernelCache<Compiled>& cache, const Spec& spec, Source&& source,
                                      bool& built_now) {
  return cache.get_or_build(spec.hash(), [&] {
    built_now = true;
    const auto start = std::chrono::steady_clock::now();
    auto c = std::make_shared<Compiled>();
    c->spec = spec;
    const OrcEntry entry = orc.compile(source(spec));
    c->fn = reinterpret_cast<decltype(c->fn)>(entry.address);
    c->origin = entry.origin;
    c->compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return std::shared_ptr<const Compiled>(std::move(c));
  });
}

}  // namespace

SpmmKernel::SpmmKernel(std::shared_ptr<const Compiled> compiled, std::shared_ptr<void> runtime)
    : compiled_(std::move(compiled)), runtime_(std::move(runtime)) {}
const CpuSpmmSpec& SpmmKernel::spec() const { return compiled_->spec; }
double SpmmKernel::compile_ms() const { return compiled_->compile_ms; }
const char* SpmmKernel::origin() const { return origin_name(compiled_->origin); }

void SpmmKernel::run(const SpmmArgs& args) const {
  auto& impl = *static_cast<Runtime::Impl*>(runtime_.get());
  const SpmmBinding bound = bind_spmm(args, impl.participants(args.threads));
  check_signature(compiled_->spec.signature, bound.problem.signature);
  run_spmm(impl.pool, impl.participants(args.threads), bound, compiled_->spec, compiled_->fn);
}

SddmmKernel::SddmmKernel(std::shared_ptr<const Compiled> compiled, std::shared_ptr<void> runtime)
    : compiled_(std::move(compiled)), runtime_(std::move(runtime)) {}
const CpuSddmmSpec& SddmmKernel::spec() const { return compiled_->spec; }
double SddmmKernel::compile_ms() const { return compiled_->compile_ms; }
const char* SddmmKernel::origin() const { return origin_name(compiled_->origin); }

void SddmmKernel::run(const SddmmArgs& args) const {
  auto& impl = *static_cast<Runtime::Impl*>(runtime_.get());
  const SddmmBinding bound = bind_sddmm(args, impl.participants(args.threads));
  check_signature(compiled_->spec.signature, bound.problem.signature);
  run_sddmm(impl.pool, impl.participants(args.threads), bound, compiled_->spec, compiled_->fn);
}

SpmmProblem describe_spmm(const SpmmArgs& args) { return bind_spmm(args, 1).problem; }
SddmmProblem describe_sddmm(const SddmmArgs& args) { return bind_sddmm(args, 1).problem; }

CpuSpmmConfig Runtime::choose_config(const SpmmProblem& problem) {
  return CpuSpmmConfig::default_for(problem, impl_->target);
}
SpmmKernel Runtime::compile(const SpmmProblem& problem) { return compile(problem, choose_config(problem)); }
SpmmKernel Runtime::compile(const SpmmProblem& problem, const CpuSpmmConfig& config) {
  const auto requested = std::chrono::steady_clock::now();
  const CpuSpmmSpec spec{problem.signature, config, impl_->target};
  validate(spec.signature, spec.config, spec.target);
  bool built_now = false;
  SpmmKernel kernel(
      build(
          impl_->orc, impl_->spmm_cache, spec, [](const CpuSpmmSpec& s) { return cpu_module_source(s); }, built_now),
      impl_);
  impl_->log_obtained(
      "spmm",
      [&] {
        return sparse_shape(problem.m, problem.k, problem.n, problem.signature.a, problem.pattern,
                            problem.signature.dense.epilogue);
      },
      spec.name(), [&] { return config == CpuSpmmConfig::default_for(problem, impl_->target); }, built_now,
      kernel.origin(), requested);
  return kernel;
}

namespace {
// With a tuning budget: the config timed once per signature, sizes and pattern statistics (on the call's own pattern
// with fresh dense operands), kept in `choices`; `tune` runs the tuner when the key is new.
template <class Config, class Problem, class Tune>
Config tuned_choice(std::mutex& mutex, std::map<std::string, Config>& choices, const Problem& p, std::int64_t dense,
                    Config fallback, const Tune& tune) {
  const std::string key =
      fmt::format("{}|{}x{}|{}|{}", to_json(p.signature).dump(), p.m, dense, to_json(p.pattern).dump(), p.threads);
  {
    std::lock_guard lock(mutex);
    if (auto it = choices.find(key); it != choices.end()) return it->second;
  }
  const auto r = tune();
  const Config config = r.measured.empty() ? fallback : r.measured[r.best].config;
  std::lock_guard lock(mutex);
  return choices.emplace(key, config).first->second;
}
}  // namespace

void Runtime::spmm(const SpmmArgs& args) {
  const int threads = impl_->participants(args.threads);
  SpmmBinding bound = bind_spmm(args, threads);
  // A CSR pattern whose entries cluster into blocks runs as BSR: the copy and its plan are kept with the plan.
  const std::shared_ptr<const SparsePlan::Blocked> blocked =
      bound.problem.signature.a.value == DType::f16
          ? nullptr
          : bound.plan->blocked(args.a, threads, bound.problem.n, cpu_spmm_max_block_rows(impl_->target));
  SpmmArgs blocked_args;
  if (blocked) {
    blocked_args = args;
    blocked_args.a = blocked->data.view();
    blocked_args.plan = blocked->plan;
    bound = bind_spmm(blocked_args, threads);
  }
  const SparseMatrix& a = blocked ? blocked_args.a : args.a;
  CpuSpmmConfig config = choose_config(bound.problem);
  if (impl_->options.tuning_budget > 0) {
    TuneOptions options;
    options.top_k = impl_->options.tuning_budget;
    config = tuned_choice(impl_->choices_mutex, impl_->spmm_choices, bound.problem, bound.problem.n * bound.problem.k,
                          config, [&] { return tune_spmm(*this, bound.problem, a, options); });
  }
  const SpmmKernel kernel = compile(bound.problem, config);
  run_spmm(impl_->pool, threads, bound, kernel.compiled_->spec, kernel.compiled_->fn);
}

CpuSddmmConfig Runtime::choose_config(const SddmmProblem& problem) {
  return CpuSddmmConfig::default_for(problem, impl_->target);
}
SddmmKernel Runtime::compile(const SddmmProblem& problem) { return compile(problem, choose_config(problem)); }
SddmmKernel Runtime::compile(const SddmmProblem& problem, const CpuSddmmConfig& config) {
  const auto requested = std::chrono::steady_clock::now();
  const CpuSddmmSpec spec{problem.signature, config, impl_->target};
  validate(spec.signature, spec.config, spec.target);
  bool built_now = false;
  SddmmKernel kernel(
      build(
          impl_->orc, impl_->sddmm_cache, spec, [](const CpuSddmmSpec& s) { return cpu_module_source(s); }, built_now),
      impl_);
  impl_->log_obtained(
      "sddmm",
      [&] {
        return sparse_shape(problem.m, problem.n, problem.k, problem.signature.pattern, problem.pattern,
                            problem.signature.dense.epilogue);
      },
      spec.name(), [&] { return config == CpuSddmmConfig::default_for(problem, impl_->target); }, built_now,
      kernel.origin(), requested);
  return kernel;
}

void Runtime::sddmm(const SddmmArgs& args) {
  const SddmmBinding bound = bind_sddmm(args, impl_->participants(args.threads));
  CpuSddmmConfig config = choose_config(bound.problem);
  if (impl_->options.tuning_budget > 0) {
    TuneOptions options;
    options.top_k = impl_->options.tuning_budget;
    config = tuned_choice(impl_->choices_mutex, impl_->sddmm_choices, bound.problem, bound.problem.n * bound.problem.k,
                          config, [&] { return tune_sddmm(*this, bound.problem, args.pattern, options); });
  }
  const SddmmKernel kernel = compile(bound.problem, config);
  run_sddmm(impl_->pool, impl_->participants(args.threads), bound, kernel.compiled_->spec, kernel.compiled_->fn);
}

std::string spmm_llvm_ir(const CpuSpmmSpec& spec, int ir_opt_level) {
  return OrcSession::ir_text(cpu_module_source(spec), checked_ir_opt_level(ir_opt_level));
}
std::string spmm_host_assembly(const CpuSpmmSpec& spec, int ir_opt_level) {
  return OrcSession::assembly(cpu_module_source(spec), checked_ir_opt_level(ir_opt_level));
}
std::string sddmm_llvm_ir(const CpuSddmmSpec& spec, int ir_opt_level) {
  return OrcSession::ir_text(cpu_module_source(spec), checked_ir_opt_level(ir_opt_level));
}
std::string sddmm_host_assembly(const CpuSddmmSpec& spec, int ir_opt_level) {
  return OrcSession::assembly(cpu_module_source(spec), checked_ir_opt_level(ir_opt_level));
}

}  // namespace tessera
