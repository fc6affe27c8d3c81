#include <fmt/format.h>

#include <algorithm>

#include "ops/gemm/gemm_binding.hpp"
#include "ops/gemm/grid_plan.hpp"
#include "ops/runtime_impl.hpp"

namespace tessera {

GemmKernel::GemmKernel(std::shared_ptr<const Compiled> compiled, std::shared_ptr<void> runtime)
    : compiled_(std::move(compiled)), runtime_(std::move(runtime)) {}

const CpuGemmSpec& GemmKernel::spec() const { return compiled_->spec; }
double GemmKernel::compile_ms() const { return compiled_->compile_ms; }

struct PreparedGemm::State {
  std::shared_ptr<const GemmKernel::Compiled> compiled;
  std::shared_ptr<void> runtime;
  GemmBinding bound;
  GemmKernelArgs args;  // points into bound.inputs
  GridPlan plan;
};

PreparedGemm::PreparedGemm(std::shared_ptr<const State> state) : state_(std::move(state)) {}

PreparedGemm GemmKernel::prepare(const GemmArgs& args) const {
  auto state = std::make_shared<PreparedGemm::State>();
  state->compiled = compiled_;
  state->runtime = runtime_;
  state->bound = bind_gemm(args);
  if (!(state->bound.problem.signature == compiled_->spec.signature))
    throw InvalidArgument("args", "describe a different signature than this kernel was compiled for:\n  kernel: " +
                                      compiled_->spec.signature.to_json().dump() +
                                      "\n  args:   " + state->bound.problem.signature.to_json().dump());
  if (args.threads < 0) throw InvalidArgument("threads", "must be >= 0 (0: every thread of the runtime)");
  const CpuGemmConfig& config = compiled_->spec.config;
  // A transposed kernel computes Dᵀ = Bᵀ·Aᵀ: it is planned and called on the transposed arguments.
  if (config.transpose) state->bound = transposed(state->bound);
  const GemmProblem& computed = state->bound.problem;
  // An empty output computes nothing, so a kernel specialised for other sizes may take it.
  if (config.fixed() && !output_is_empty(computed) &&
      (computed.m != config.fixed_m || computed.n != config.fixed_n || computed.k != config.fixed_k)) {
    const GemmProblem& asked = config.transpose ? transposed(computed) : computed;
    throw InvalidArgument("args", fmt::format("are {}x{}x{}, this kernel is specialised for {}x{}x{}", asked.m, asked.n,
                                              asked.k, config.transpose ? config.fixed_n : config.fixed_m,
                                              config.transpose ? config.fixed_m : config.fixed_n, config.fixed_k));
  }
  const auto& impl = *static_cast<const Runtime::Impl*>(runtime_.get());
  const int wanted = args.threads ? std::min(args.threads, impl.threads) : impl.threads;
  state->plan = plan_grid(computed.m, computed.n, computed.k, computed.batch, config, wanted);
  state->args = state->bound.kernel_args();
  state->args.tile_m = state->plan.tile_m;
  state->args.tile_n = state->plan.tile_n;
  return PreparedGemm(std::move(state));
}

void GemmKernel::run(const GemmArgs& args) const { prepare(args).run(); }

void PreparedGemm::run() const {
  const State& s = *state_;
  const std::int64_t tiles = s.plan.tiles;
  if (tiles == 0) return;
  const int participants = s.plan.participants;
  const GemmKernelFn fn = s.compiled->fn;
  const GemmKernelArgs* kargs = &s.args;
  const auto workspace = static_cast<std::size_t>(s.compiled->spec.config.workspace_bytes());
  if (participants == 1) {
    // One thread: run on the caller with its own scratch, without taking the pool.
    thread_local Scratch scratch;
    fn(kargs, scratch.get(workspace), 0, tiles);
    return;
  }
  // Tiles are claimed in chunks so that tiny tiles (small batched GEMMs) do not all contend for the counter.
  const std::int64_t chunk = std::max<std::int64_t>(1, tiles / (8 * participants));
  auto& impl = *static_cast<Runtime::Impl*>(s.runtime.get());
  impl.pool.run(participants, (tiles + chunk - 1) / chunk, workspace, [&](std::int64_t task, void* scratch) {
    fn(kargs, scratch, task * chunk, std::min(tiles, (task + 1) * chunk));
  });
}

}  // namespace tessera
