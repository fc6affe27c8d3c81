#include <fmt/format.h>

#include <algorithm>

#include "ops/gemm_binding.hpp"
#include "ops/grid_plan.hpp"
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
  const CpuGemmConfig& fixed = compiled_->spec.config;
  if (fixed.fixed() &&
      (bound.problem.m != fixed.fixed_m || bound.problem.n != fixed.fixed_n || bound.problem.k != fixed.fixed_k))
    throw InvalidArgument(
        "args", fmt::format("are {}x{}x{}, this kernel is specialised for {}x{}x{}", bound.problem.m, bound.problem.n,
                            bound.problem.k, fixed.fixed_m, fixed.fixed_n, fixed.fixed_k));
  auto& impl = *static_cast<Runtime::Impl*>(runtime_.get());
  const CpuGemmConfig& config = compiled_->spec.config;
  const GemmProblem& problem = bound.problem;
  const int wanted = args.threads ? std::min(args.threads, impl.threads) : impl.threads;
  const GridPlan plan = plan_grid(problem.m, problem.n, problem.k, problem.batch, config, wanted);
  if (plan.tiles == 0) return;
  GemmKernelArgs kargs = bound.kernel_args();
  kargs.tile_m = plan.tile_m;
  kargs.tile_n = plan.tile_n;
  const std::int64_t tiles = plan.tiles;
  const int participants = plan.participants;
  const GemmKernelFn fn = compiled_->fn;
  const auto workspace = static_cast<std::size_t>(config.workspace_bytes());
  if (participants == 1) {
    // One thread: run on the caller with its own scratch, without taking the pool.
    thread_local Scratch scratch;
    fn(&kargs, scratch.get(workspace), 0, tiles);
    return;
  }
  // Tiles are claimed in chunks so that tiny tiles (small batched GEMMs) do not all contend for the counter.
  const std::int64_t chunk = std::max<std::int64_t>(1, tiles / (8 * participants));
  impl.pool.run(participants, (tiles + chunk - 1) / chunk, workspace, [&](std::int64_t task, void* scratch) {
    fn(&kargs, scratch, task * chunk, std::min(tiles, (task + 1) * chunk));
  });
}

}  // namespace tessera
