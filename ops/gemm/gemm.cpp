#include <fmt/format.h>

#include <algorithm>

#include "generator/gemm/gemm_json.hpp"
#include "generator/gemm/grid_plan.hpp"
#include "ops/gemm/gemm_binding.hpp"
#include "ops/runtime_impl.hpp"

namespace tessera {

GemmKernel::GemmKernel(std::shared_ptr<const Compiled> compiled, std::shared_ptr<void> runtime)
    : compiled_(std::move(compiled)), runtime_(std::move(runtime)) {}

const CpuGemmSpec& GemmKernel::spec() const { return compiled_->spec; }
double GemmKernel::compile_ms() const { return compiled_->compile_ms; }
const char* GemmKernel::origin() const { return origin_name(compiled_->origin); }

// A call validated and planned: the binding (transposed when the kernel is), the kernel's arguments and the grid.
struct GemmKernel::Planned {
  GemmBinding bound;
  GemmKernelArgs args;  // points into bound.inputs
  GridPlan plan;
};

struct PreparedGemm::State {
  std::shared_ptr<const GemmKernel::Compiled> compiled;
  std::shared_ptr<void> runtime;
  GemmKernel::Planned call;
};

PreparedGemm::PreparedGemm(std::shared_ptr<const State> state) : state_(std::move(state)) {}

void GemmKernel::plan(const Compiled& compiled, const void* runtime, GemmBinding&& bound, int threads, Planned& out) {
  const auto& impl = *static_cast<const Runtime::Impl*>(runtime);
  if (!(bound.problem.signature == compiled.spec.signature))
    throw InvalidArgument("args", "describe a different signature than this kernel was compiled for:\n  kernel: " +
                                      to_json(compiled.spec.signature).dump() +
                                      "\n  args:   " + to_json(bound.problem.signature).dump());
  if (threads < 0) throw InvalidArgument("threads", "must be >= 0 (0: every thread of the runtime)");
  const CpuGemmConfig& config = compiled.spec.config;
  // A transposed kernel computes Dᵀ = Bᵀ·Aᵀ: it is planned and called on the transposed arguments.
  out.bound = config.transpose ? transposed(bound) : std::move(bound);
  const GemmProblem& computed = out.bound.problem;
  // An empty output computes nothing, so a kernel specialised for other sizes may take it.
  if (config.fixed() && !output_is_empty(computed) &&
      (computed.m != config.fixed_m || computed.n != config.fixed_n || computed.k != config.fixed_k)) {
    const GemmProblem& asked = config.transpose ? transposed(computed) : computed;
    throw InvalidArgument("args", fmt::format("are {}x{}x{}, this kernel is specialised for {}x{}x{}", asked.m, asked.n,
                                              asked.k, config.transpose ? config.fixed_n : config.fixed_m,
                                              config.transpose ? config.fixed_m : config.fixed_n, config.fixed_k));
  }
  const int wanted = threads ? std::min(threads, impl.threads) : impl.threads;
  out.plan = plan_grid(computed.m, computed.n, computed.k, computed.batch, config, wanted);
  out.args = out.bound.kernel_args();
  out.args.tile_m = out.plan.tile_m;
  out.args.tile_n = out.plan.tile_n;
}

void GemmKernel::run_planned(const Compiled& compiled, void* runtime, const Planned& call) {
  auto& impl = *static_cast<Runtime::Impl*>(runtime);
  const std::int64_t tiles = call.plan.tiles;
  if (tiles == 0) return;
  const int participants = call.plan.participants;
  const GemmKernelFn fn = compiled.fn;
  const GemmKernelArgs* kargs = &call.args;
  const auto workspace = static_cast<std::size_t>(compiled.spec.config.workspace_bytes());
  if (participants == 1) {
    // One thread: run on the caller with its own scratch, without taking the pool.
    thread_local Scratch scratch;
    fn(kargs, scratch.get(workspace), 0, tiles);
    return;
  }
  // Tiles are claimed in chunks so that tiny tiles (small batched GEMMs) do not all contend for the counter.
  const std::int64_t chunk = std::max<std::int64_t>(1, tiles / (8 * participants));
  impl.pool.run(participants, (tiles + chunk - 1) / chunk, workspace, [&](std::int64_t task, void* scratch) {
    fn(kargs, scratch, task * chunk, std::min(tiles, (task + 1) * chunk));
  });
}

PreparedGemm GemmKernel::prepare(const GemmArgs& args) const {
  auto state = std::make_shared<PreparedGemm::State>();
  state->compiled = compiled_;
  state->runtime = runtime_;
  plan(*compiled_, runtime_.get(), bind_gemm(args), args.threads, state->call);
  return PreparedGemm(std::move(state));
}

void GemmKernel::run(const GemmArgs& args) const { run_bound(bind_gemm(args), args.threads); }

// The call planned on the stack: no allocation beyond the binding's, so a repeated small GEMM pays little more
// than the kernel (tessera-bench dispatch).
void GemmKernel::run_bound(GemmBinding&& bound, int threads) const {
  Planned call;
  plan(*compiled_, runtime_.get(), std::move(bound), threads, call);
  run_planned(*compiled_, runtime_.get(), call);
}

void PreparedGemm::run() const { GemmKernel::run_planned(*state_->compiled, state_->runtime.get(), state_->call); }

}  // namespace tessera
