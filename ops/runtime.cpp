#include <chrono>
#include <thread>

#include "ops/gemm_binding.hpp"
#include "ops/runtime_impl.hpp"

namespace tessera {

namespace {
int pool_threads(const RuntimeOptions& options) {
  if (options.threads < 0) throw InvalidArgument("threads", "must be >= 0 (0: one per hardware thread)");
  if (options.threads > 1024) throw InvalidArgument("threads", "must be <= 1024");
  return options.threads ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

OrcOptions orc_options(const RuntimeOptions& options) {
  if (options.ir_opt_level != 0 && options.ir_opt_level != 2 && options.ir_opt_level != 3)
    throw InvalidArgument("ir_opt_level", "must be 0, 2 or 3");
  return {options.ir_opt_level};
}
}  // namespace

Runtime::Impl::Impl(const RuntimeOptions& o)
    : options(o),
      target(Target::parse(o.target)),
      threads(pool_threads(o)),
      orc(orc_options(o)),
      pool(threads - 1, 200, o.pin_workers) {}

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_shared<Impl>(options)) {}
Runtime::~Runtime() = default;

const Target& Runtime::target() const { return impl_->target; }
int Runtime::threads() const { return impl_->threads; }
CacheStats Runtime::cache_stats() const { return impl_->cache.stats(); }

GemmProblem describe_gemm(const GemmArgs& args) { return bind_gemm(args).problem; }

GemmKernel Runtime::compile(const GemmProblem& problem) {
  return compile(problem, CpuGemmConfig::default_for(problem, impl_->target));
}

GemmKernel Runtime::compile(const GemmProblem& problem, const CpuGemmConfig& config) {
  problem.signature.check();
  KernelSpec spec{problem.signature, config, impl_->target};
  validate(spec.signature, spec.config, spec.target);
  auto compiled = impl_->cache.get_or_build(spec.hash(), [&] {
    const auto start = std::chrono::steady_clock::now();
    auto c = std::make_shared<GemmKernel::Compiled>();
    c->spec = spec;
    c->fn = reinterpret_cast<GemmKernelFn>(impl_->orc.compile(spec));
    c->compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return std::shared_ptr<const GemmKernel::Compiled>(std::move(c));
  });
  return GemmKernel(std::move(compiled), impl_);
}

void Runtime::gemm(const GemmArgs& args) { compile(describe(args)).run(args); }

}  // namespace tessera
