#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "generator/gemm/gemm_variants.hpp"
#include "generator/llvm/gemm_emitter.hpp"
#include "jit/amx_permission.hpp"
#include "jit/disk_cache.hpp"
#include "ops/gemm/gemm_binding.hpp"
#include "ops/runtime_impl.hpp"
#include "tessera/cost_models.hpp"
#include "tessera/tuner.hpp"

namespace tessera {

int checked_ir_opt_level(int level) {
  if (level != 0 && level != 2 && level != 3) throw InvalidArgument("ir_opt_level", "must be 0, 2 or 3");
  return level;
}

// Runs task(t, scratch) for t < tasks on up to `participants` threads of the pool (the caller alone for one).
void run_tasks(ThreadPool& pool, int participants, std::int64_t tasks, std::size_t scratch_bytes,
               const ThreadPool::Task& task) {
  if (tasks == 0) return;
  participants = static_cast<int>(std::min<std::int64_t>(participants, tasks));
  if (participants == 1) {
    thread_local Scratch scratch;
    void* memory = scratch.get(scratch_bytes);
    for (std::int64_t t = 0; t < tasks; ++t) task(t, memory);
    return;
  }
  pool.run(participants, tasks, scratch_bytes, task);
}

namespace {
int verbose_level() {
  const char* text = std::getenv("TESSERA_VERBOSE");
  return text && *text >= '1' && *text <= '9' && text[1] == 0 ? *text - '0' : 0;
}

int pool_threads(const RuntimeOptions& options) {
  if (options.threads < 0) throw InvalidArgument("threads", "must be >= 0 (0: one per hardware thread)");
  if (options.threads > 1024) throw InvalidArgument("threads", "must be <= 1024");
  return options.threads ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::unique_ptr<DiskCache> own_disk_cache(const RuntimeOptions& options) {
  if (!options.disk_cache || options.cache_dir.empty()) return nullptr;
  auto cache = std::make_unique<DiskCache>(options.cache_dir, DiskCache::max_bytes_from_environment());
  if (!cache->warning().empty()) std::fprintf(stderr, "tessera: %s\n", cache->warning().c_str());
  return cache;
}

OrcOptions orc_options(const RuntimeOptions& options, const DiskCache* own) {
  return {checked_ir_opt_level(options.ir_opt_level),
          own                  ? own
          : options.disk_cache ? DiskCache::process_cache()
                               : nullptr,
          pool_threads(options)};
}
}  // namespace

Runtime::Impl::Impl(const RuntimeOptions& o)
    : options(o),
      target(CpuTarget::parse(o.target)),
      threads(pool_threads(o)),
      own_disk_cache(tessera::own_disk_cache(o)),
      orc(orc_options(o, own_disk_cache.get())),
      pool(threads - 1, 200, o.pin_workers),
      cost_model(load_cpu_cost_model(o.cost_model, target).model) {
  if (o.tuning_budget < 0) throw InvalidArgument("tuning_budget", "must be >= 0");
  verbose = verbose_level();
}

// "1024x1024x1024x1,f32:rr->r,epilogue=alpha*acc" (A and B types both named where they differ: "u8i8"): what a
// verbose line says of a problem.
std::string describe_shape(const GemmProblem& p) {
  const GemmSignature& s = p.signature;
  const std::string types = s.a.dtype == s.b.dtype ? std::string(dtype_name(s.a.dtype))
                                                   : fmt::format("{}{}", dtype_name(s.a.dtype), dtype_name(s.b.dtype));
  return fmt::format("{}x{}x{}x{},{}:{}{}->{},epilogue={}", p.m, p.n, p.k, p.batch, types,
                     s.a.layout.name().substr(0, 1), s.b.layout.name().substr(0, 1), s.d.layout.name().substr(0, 1),
                     s.epilogue.text());
}

void log_kernel(const char* op, const std::string& problem, const std::string& name, const std::string& path,
                const char* cache, double ms) {
  std::fprintf(stderr, "tessera: %s,kernel,%s,%s,choice=%s,cache=%s,compile_ms=%.3f\n", op, problem.c_str(),
               name.c_str(), path.c_str(), cache, ms);
}

void log_gemm(const GemmProblem& problem, const GemmKernel& kernel, const std::string& path, const char* cache,
              double ms) {
  log_kernel("gemm", describe_shape(problem), kernel.name(), path, cache, ms);
}

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_shared<Impl>(options)) {}
Runtime::~Runtime() = default;

const CpuTarget& Runtime::target() const { return impl_->target; }
int Runtime::threads() const { return impl_->threads; }
CacheStats Runtime::cache_stats() const {
  const KernelCacheStats g = impl_->cache.stats(), a = impl_->attention_cache.stats();
  std::lock_guard lock(impl_->choices_mutex);
  return {g.hits + a.hits + impl_->dispatch_hits, g.misses + a.misses, g.builds + a.builds, g.failures + a.failures};
}

GemmProblem describe_gemm(const GemmArgs& args) { return bind_gemm(args).problem; }

namespace {
// A product of a few rows with a B beyond L2 is, where applications issue it (a decoder's projections at a handful
// of tokens), a layer's weights read once per step: ranked as B cold, the condition its tuning shapes were timed in
// (the skinny family of bench/suites/tuning.txt).
bool b_arrives_cold(const GemmProblem& p, const CpuTarget& t) {
  const double b_bytes = static_cast<double>(p.k) * static_cast<double>(p.n) * dtype_bytes(p.signature.b.dtype);
  return p.m <= 32 && b_bytes > static_cast<double>(t.l2_bytes);
}

}  // namespace

CpuGemmConfig Runtime::choose_config(const GemmProblem& asked) { return impl_->choose(*this, asked).config; }
Runtime::GemmChoice Runtime::choice(const GemmProblem& asked) { return impl_->choose(*this, asked); }

Runtime::Impl::GemmChoice Runtime::Impl::choose(Runtime& runtime, const GemmProblem& asked) {
  check_extents(asked);
  const GemmProblem problem = with_nonempty_output(asked);
  GemmProblem ranked = problem;
  ranked.b_cold = problem.b_cold || b_arrives_cold(problem, target);
  const GemmProblem share = thread_share(ranked, problem.threads > 0 ? std::min(problem.threads, threads) : threads);
  // The split over threads is ranked for the runtime's threads, not a call's: a call's thread count never changes
  // which kernel, and so which bits, it gets.
  if (!cost_model || !cost_model->covers(ranked, target))
    return {CpuGemmConfig::default_for(problem, target), "rules", ranked.b_cold};
  // What makes two problems the same shape: operand types and layouts, the epilogue and its tensors, the sizes
  // (and each thread's share of the batch).
  const GemmSignature& g = problem.signature;
  std::string key =
      fmt::format("{}{}{}{}{}{}{}{}|{}|{}x{}x{}x{}/{}", dtype_name(g.a.dtype), g.a.layout.name(), dtype_name(g.b.dtype),
                  g.b.layout.name(), dtype_name(g.c.dtype), g.c.layout.name(), dtype_name(g.d.dtype), g.d.layout.name(),
                  g.epilogue.text(), problem.m, problem.n, problem.k, problem.batch, share.batch);
  for (const auto& in : g.inputs)
    key += fmt::format("|{}:{}:{}", in.name, index_form_name(in.form), in.operand.layout.name());
  {
    std::lock_guard lock(choices_mutex);
    if (auto it = choices.find(key); it != choices.end()) return it->second;
  }
  GemmChoice choice;
  if (options.tuning_budget > 0) {
    TuneOptions tune;
    tune.top_k = options.tuning_budget;
    const TuneResult r = Tuner(runtime, cost_model, nullptr, tune).tune(ranked, "runtime");
    choice = r.measured.empty() ? GemmChoice{CpuGemmConfig::default_for(problem, target), "rules", ranked.b_cold}
                                : GemmChoice{r.measured[r.best].config, "tuner", ranked.b_cold};
  } else {
    const std::vector<CpuGemmConfig> space = cpu_variants(problem, target);
    choice =
        space.empty()
            ? GemmChoice{CpuGemmConfig::default_for(problem, target), "rules", ranked.b_cold}
            : GemmChoice{space[rank_by_score(score_on_threads(*cost_model, problem, share, space, target, threads))[0]],
                         "model:" + cost_model->name(), ranked.b_cold};
  }
  std::lock_guard lock(choices_mutex);
  return choices.emplace(key, choice).first->second;
}

GemmKernel Runtime::compile(const GemmProblem& problem) {
  const Hash128 key = dispatch_key(problem);
  {
    std::lock_guard lock(impl_->choices_mutex);
    if (auto it = impl_->dispatch.find(key); it != impl_->dispatch.end()) {
      ++impl_->dispatch_hits;
      return GemmKernel(it->second, impl_);
    }
  }
  const Impl::GemmChoice choice = impl_->choose(*this, problem);
  GemmKernel kernel = compile_chosen(problem, choice.config, choice.path);
  std::lock_guard lock(impl_->choices_mutex);
  impl_->dispatch.emplace(key, kernel.compiled_);
  return kernel;
}

GemmKernel Runtime::compile(const GemmProblem& problem, const CpuGemmConfig& config) {
  return compile_chosen(problem, config, "given");
}

GemmKernel Runtime::compile_chosen(const GemmProblem& problem, const CpuGemmConfig& config, const std::string& path) {
  const auto requested = std::chrono::steady_clock::now();
  check_extents(problem);
  problem.signature.check();
  CpuGemmSpec spec{problem.signature, config, impl_->target};
  validate(spec.signature, spec.config, spec.target);
  if (config.amx == CpuGemmConfig::kAmxTiles) request_amx_tile_data();
  bool compiled_now = false;  // the cache built it on this call (else it had it): for the verbose log
  auto compiled = impl_->cache.get_or_build(spec.hash(), [&] {
    compiled_now = true;
    const auto start = std::chrono::steady_clock::now();
    auto c = std::make_shared<GemmKernel::Compiled>();
    c->spec = spec;
    const OrcEntry entry = impl_->orc.compile(cpu_module_source(spec));
    c->fn = reinterpret_cast<GemmKernelFn>(entry.address);
    c->origin = entry.origin;
    c->compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return std::shared_ptr<const GemmKernel::Compiled>(std::move(c));
  });
  GemmKernel kernel(std::move(compiled), impl_);
  if (impl_->verbose >= 2 || (impl_->verbose >= 1 && compiled_now)) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - requested).count();
    log_gemm(problem, kernel, path, compiled_now ? kernel.origin() : "memory", ms);
  }
  return kernel;
}

void Runtime::gemm(const GemmArgs& args) {
  GemmBinding bound = bind_gemm(args);
  if (output_is_empty(bound.problem)) return;  // validated; nothing to write, as in BLAS
  if (impl_->verbose < 2) return compile(bound.problem).run_bound(std::move(bound), args.threads);
  const GemmProblem problem = bound.problem;
  const GemmKernel kernel = compile(problem);
  const auto start = std::chrono::steady_clock::now();
  kernel.run_bound(std::move(bound), args.threads);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "tessera: gemm,run,%s,%s,run_ms=%.4f\n", describe_shape(problem).c_str(), kernel.name().c_str(),
               ms);
}

std::string gemm_llvm_ir(const CpuGemmSpec& spec, int ir_opt_level) {
  return OrcSession::ir_text(cpu_module_source(spec), checked_ir_opt_level(ir_opt_level));
}

std::string gemm_host_assembly(const CpuGemmSpec& spec, int ir_opt_level) {
  return OrcSession::assembly(cpu_module_source(spec), checked_ir_opt_level(ir_opt_level));
}

}  // namespace tessera
