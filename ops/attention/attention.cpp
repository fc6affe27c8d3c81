#include <chrono>

#include "generator/llvm/attention_emitter.hpp"
#include "ops/attention/attention_binding.hpp"
#include "ops/runtime_impl.hpp"

namespace tessera {

AttentionKernel::AttentionKernel(std::shared_ptr<const Compiled> compiled, std::shared_ptr<void> runtime)
    : compiled_(std::move(compiled)), runtime_(std::move(runtime)) {}

const CpuAttentionSpec& AttentionKernel::spec() const { return compiled_->spec; }
double AttentionKernel::compile_ms() const { return compiled_->compile_ms; }
std::int64_t AttentionKernel::workspace_bytes() const {
  return compiled_->spec.config.workspace_bytes(compiled_->spec.signature, compiled_->spec.target);
}

void AttentionKernel::run(const AttentionArgs& args) const {
  const AttentionBinding bound = bind_attention(args);
  const AttentionProblem& p = bound.problem;
  const CpuAttentionSpec& spec = compiled_->spec;
  if (!(p.signature == spec.signature))
    throw InvalidArgument("args", "describe a different signature than this kernel was compiled for:\n  kernel: " +
                                      spec.signature.to_json().dump() + "\n  args:   " + p.signature.to_json().dump());
  const int block_q = spec.config.block_q;
  // Tasks are (batch item, head, query block), batch items in order; blocks_before[b] counts the tasks before b.
  std::vector<std::int64_t> blocks_before{0};
  for (std::int64_t b = 0; b < p.batch; ++b)
    blocks_before.push_back(blocks_before.back() + p.heads * ceil_div(p.q_len(b), block_q));
  const std::int64_t tasks = blocks_before.back();
  if (tasks == 0) return;
  const AttentionKernelFn fn = compiled_->fn;
  const auto workspace = static_cast<std::size_t>(workspace_bytes());
  const auto task = [&](std::int64_t t, void* scratch) {
    const auto b = static_cast<std::int64_t>(std::upper_bound(blocks_before.begin(), blocks_before.end(), t) -
                                             blocks_before.begin()) -
                   1;
    const std::int64_t blocks = ceil_div(p.q_len(b), block_q);
    const std::int64_t within = t - blocks_before[static_cast<std::size_t>(b)];
    const AttentionBlockArgs a = block_args(bound, b, within / blocks, within % blocks, block_q);
    fn(&a, scratch);
  };
  auto& impl = *static_cast<Runtime::Impl*>(runtime_.get());
  const int participants = static_cast<int>(
      std::min<std::int64_t>(tasks, args.threads ? std::min(args.threads, impl.threads) : impl.threads));
  if (participants == 1) {
    thread_local Scratch scratch;
    void* memory = scratch.get(workspace);
    for (std::int64_t t = 0; t < tasks; ++t) task(t, memory);
    return;
  }
  impl.pool.run(participants, tasks, workspace, task);
}

AttentionProblem describe_attention(const AttentionArgs& args) { return bind_attention(args).problem; }

AttentionKernel Runtime::compile(const AttentionProblem& problem) {
  return compile(problem, CpuAttentionConfig::default_for(problem, impl_->target));
}

AttentionKernel Runtime::compile(const AttentionProblem& problem, const CpuAttentionConfig& config) {
  const CpuAttentionSpec spec{problem.signature, config, impl_->target};
  validate(spec.signature, spec.config, spec.target);
  auto compiled = impl_->attention_cache.get_or_build(spec.hash(), [&] {
    const auto start = std::chrono::steady_clock::now();
    auto c = std::make_shared<AttentionKernel::Compiled>();
    c->spec = spec;
    c->fn = reinterpret_cast<AttentionKernelFn>(impl_->orc.compile(cpu_module_source(spec)));
    c->compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return std::shared_ptr<const AttentionKernel::Compiled>(std::move(c));
  });
  return AttentionKernel(std::move(compiled), impl_);
}

void Runtime::attention(const AttentionArgs& args) { compile(describe(args)).run(args); }

std::string attention_llvm_ir(const CpuAttentionSpec& spec, int ir_opt_level) {
  return OrcSession::ir_text(cpu_module_source(spec), checked_ir_opt_level(ir_opt_level));
}

std::string attention_host_assembly(const CpuAttentionSpec& spec, int ir_opt_level) {
  return OrcSession::assembly(cpu_module_source(spec), checked_ir_opt_level(ir_opt_level));
}

}  // namespace tessera
