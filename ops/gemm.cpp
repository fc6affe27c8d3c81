#include <algorithm>

#include "ops/gemm_binding.hpp"
#include "ops/runtime_impl.hpp"

namespace tessera {

GemmKernel::GemmKernel(std::shared_ptr<const Compiled> compiled, std::shared_ptr<void> runtime)
    : compiled_(std::move(compiled)), runtime_(std::move(runtime)) {}

const KernelSpec& GemmKernel::spec() const { return compiled_->spec; }
double GemmKernel::compile_ms() const { return compiled_->compile_ms; }

void GemmKernel::run(const GemmArgs& args) const {
  const GemmBinding bound = bind_gemm(args);
  if (!(bound.problem.signature == compiled_->spec.signature))
    throw InvalidArgument("args", "describe a different signature than this kernel was compiled for:\n  kernel: " +
                                      compiled_->spec.signature.to_json().dump() +
                                      "\n  args:   " + bound.problem.signature.to_json().dump());
  if (args.threads < 0) throw InvalidArgument("threads", "must be >= 0 (0: every thread of the runtime)");
  auto& impl = *static_cast<Runtime::Impl*>(runtime_.get());
  const CpuGemmConfig& config = compiled_->spec.config;
  const std::int64_t tiles = gemm_tile_count(bound.problem.m, bound.problem.n, bound.problem.batch, config);
  if (tiles == 0) return;
  const GemmKernelArgs kargs = bound.kernel_args();
  const int wanted = args.threads ? std::min(args.threads, impl.threads) : impl.threads;
  const int participants = static_cast<int>(std::min<std::int64_t>(wanted, tiles));
  const GemmKernelFn fn = compiled_->fn;
  impl.pool.run(participants, static_cast<std::size_t>(config.workspace_bytes()), [&](int p, void* scratch) {
    const std::int64_t begin = tiles * p / participants, end = tiles * (p + 1) / participants;
    if (begin < end) fn(&kargs, scratch, begin, end);
  });
}

}  // namespace tessera
