#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <new>
#include <vector>

#include "generator/attention/attention_json.hpp"
#include "generator/cost/attention_cost.hpp"
#include "generator/llvm/attention_emitter.hpp"
#include "jit/amx_permission.hpp"
#include "ops/attention/attention_binding.hpp"
#include "ops/runtime_impl.hpp"
#include "tessera/tuner.hpp"

namespace tessera {

AttentionKernel::AttentionKernel(std::shared_ptr<const Compiled> compiled, std::shared_ptr<void> runtime)
    : compiled_(std::move(compiled)), runtime_(std::move(runtime)) {}

const CpuAttentionSpec& AttentionKernel::spec() const { return compiled_->spec; }
double AttentionKernel::compile_ms() const { return compiled_->compile_ms; }
const char* AttentionKernel::origin() const { return origin_name(compiled_->origin); }
double AttentionKernel::weight_rounding() const {
  const CpuAttentionSpec& spec = compiled_->spec;
  return spec.config.grouped(spec.signature, spec.target) ? 1.0 / 256 : 0.0;
}
std::int64_t AttentionKernel::workspace_bytes() const {
  return compiled_->spec.config.workspace_bytes(compiled_->spec.signature, compiled_->spec.target);
}

namespace {

// The runtime's pool and allocator as the schedule's executor.
struct PoolExecutor {
  ThreadPool* pool;
  int participants;
  static void run(void* self, std::int64_t count, std::int64_t scratch_bytes, AttentionExecutor::Task task,
                  const void* context) {
    auto& e = *static_cast<PoolExecutor*>(self);
    run_tasks(*e.pool, e.participants, count, static_cast<std::size_t>(scratch_bytes),
              [&](std::int64_t t, void* scratch) { task(context, t, scratch); });
  }
  static void* allocate(void*, std::int64_t bytes) {
    return ::operator new(static_cast<std::size_t>(bytes), std::align_val_t(64), std::nothrow);
  }
  static void release(void*, void* buffer) { ::operator delete(buffer, std::align_val_t(64)); }
};

// The plain call of a problem's sizes (no tensors): what the buffers of its schedule take.
AttentionCall sizes_of(const AttentionProblem& p, std::vector<std::int64_t>& offsets_q,
                       std::vector<std::int64_t>& offsets_kv) {
  AttentionCall c;
  c.batch = p.batch, c.heads = p.heads, c.kv_heads = p.kv_heads, c.seq_q = p.seq_q, c.seq_kv = p.seq_kv;
  c.head_dim_v = p.signature.head_dim_v;
  if (p.varlen()) {
    offsets_q = {0}, offsets_kv = {0};
    for (std::int64_t b = 0; b < p.batch; ++b) {
      offsets_q.push_back(offsets_q.back() + p.q_len(b));
      offsets_kv.push_back(offsets_kv.back() + p.kv_len(b));
    }
    c.offsets_q = offsets_q.data(), c.offsets_kv = offsets_kv.data();
  }
  return c;
}

void narrow_keys(const void* context, AttentionBlockArgs& call) {
  const auto& spec = *static_cast<const CpuAttentionSpec*>(context);
  skip_masked_key_blocks(call, spec.signature.score_mod, spec.config.block_kv);
}

}  // namespace

std::int64_t AttentionKernel::memory_bytes(const AttentionProblem& problem, int threads) const {
  std::vector<std::int64_t> offsets_q, offsets_kv;
  return workspace_bytes() * std::max(1, threads) +
         attention_buffer_bytes(sizes_of(problem, offsets_q, offsets_kv), blocking_of(compiled_->spec), threads);
}

void AttentionKernel::run(const AttentionArgs& args) const {
  const AttentionBinding bound = bind_attention(args);
  const AttentionProblem& p = bound.problem;
  const CpuAttentionSpec& spec = compiled_->spec;
  if (!(p.signature == spec.signature))
    throw InvalidArgument("args", "describe a different signature than this kernel was compiled for:\n  kernel: " +
                                      to_json(spec.signature).dump() + "\n  args:   " + to_json(p.signature).dump());
  auto& impl = *static_cast<Runtime::Impl*>(runtime_.get());
  PoolExecutor pool{&impl.pool, args.threads ? std::min(args.threads, impl.threads) : impl.threads};
  AttentionExecutor executor;
  executor.self = &pool;
  executor.threads = pool.participants;
  executor.run = PoolExecutor::run;
  executor.allocate = PoolExecutor::allocate;
  executor.release = PoolExecutor::release;
  AttentionKernels kernels;
  kernels.run = compiled_->fn;
  kernels.pack = compiled_->pack;
  if (spec.signature.score_mod.can_mask()) kernels.narrow = narrow_keys, kernels.narrow_context = &spec;
  if (run_attention(bound.call(), blocking_of(spec), kernels, executor) != 0) throw std::bad_alloc();
}

AttentionProblem describe_attention(const AttentionArgs& args) { return bind_attention(args).problem; }

namespace {

// Prefill shorter than this is ranked by the analytic model (below).
constexpr std::int64_t kAnalyticPrefillRows = 512;

std::string choice_key(const AttentionProblem& problem) {
  std::string key = to_json(problem.signature).dump() + fmt::format("|{}x{}/{}x{}x{}", problem.batch, problem.heads,
                                                                    problem.kv_heads, problem.seq_q, problem.seq_kv);
  for (std::size_t b = 0; b < problem.seq_lens_q.size(); ++b)
    key += fmt::format("|{}:{}", problem.seq_lens_q[b], problem.seq_lens_kv[b]);
  return key;
}

}  // namespace

CpuAttentionConfig Runtime::choose_config(const AttentionProblem& problem) {
  const CpuAttentionConfig fallback = CpuAttentionConfig::default_for(problem, impl_->target);
  std::int64_t longest_q = problem.seq_q;
  for (std::int64_t len : problem.seq_lens_q) longest_q = std::max(longest_q, len);
  // default_for's blocks are sized for long sequences (a task of up to 96 query rows); on prefill of fewer than 512
  // rows the analytic model's top variant loses far less (`tessera model holdout --op attention`, Zen 4, 1 thread:
  // 11 such problems of 40-400 rows, default_for 36.5% behind the best on average, the analytic top-1 3.3%: smaller
  // blocks balance the causal triangle and give every thread a task).
  // Not where keys come from memory: the model does not see that keys packed for several blocks leave the caches
  // (Zen 4, 8 heads × 128 rows × 16384 keys, d 128: its top-1, 16-row blocks, 152 ms; default_for's one block 96).
  const bool analytic = !fallback.in_place && fallback.amx == CpuAttentionConfig::kAmxNone &&
                        longest_q < kAnalyticPrefillRows && !keys_outgrow_l2(problem, impl_->target);
  if (impl_->options.tuning_budget <= 0 && !analytic) return fallback;
  // Chosen once per shape: the signature, the sizes and the lengths.
  const std::string key = choice_key(problem);
  {
    std::lock_guard lock(impl_->choices_mutex);
    if (auto it = impl_->attention_choices.find(key); it != impl_->attention_choices.end()) return it->second;
  }
  CpuAttentionConfig config = fallback;
  if (impl_->options.tuning_budget > 0) {
    TuneOptions options;
    options.top_k = impl_->options.tuning_budget;
    const AttentionTuneResult r = tune_attention(*this, problem, options);
    if (!r.measured.empty()) config = r.measured[r.best].config;
  } else {
    const std::vector<CpuAttentionConfig> space = cpu_attention_variants(problem, impl_->target);
    double least = attention_cycles(problem, fallback, impl_->target);
    for (const CpuAttentionConfig& c : space)
      if (const double cycles = attention_cycles(problem, c, impl_->target); cycles < least) least = cycles, config = c;
  }
  std::lock_guard lock(impl_->choices_mutex);
  return impl_->attention_choices.emplace(key, config).first->second;
}

AttentionKernel Runtime::compile(const AttentionProblem& problem) { return compile(problem, choose_config(problem)); }

AttentionKernel Runtime::compile(const AttentionProblem& problem, const CpuAttentionConfig& config) {
  const auto requested = std::chrono::steady_clock::now();
  const CpuAttentionSpec spec{problem.signature, config, impl_->target};
  validate(spec.signature, spec.config, spec.target);
  if (config.amx == CpuAttentionConfig::kAmxTiles) request_amx_tile_data();
  bool built_now = false;
  auto compiled = impl_->attention_cache.get_or_build(spec.hash(), [&] {
    built_now = true;
    const auto start = std::chrono::steady_clock::now();
    auto c = std::make_shared<AttentionKernel::Compiled>();
    c->spec = spec;
    const OrcEntry entry = impl_->orc.compile(cpu_module_source(spec));
    c->fn = reinterpret_cast<AttentionKernelFn>(entry.address);
    c->origin = entry.origin;
    c->pack = reinterpret_cast<AttentionPackFn>(impl_->orc.address(spec.name() + "_pack"));
    c->compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return std::shared_ptr<const AttentionKernel::Compiled>(std::move(c));
  });
  AttentionKernel kernel(std::move(compiled), impl_);
  impl_->log_obtained(
      "attention",
      [&] {
        const AttentionSignature& s = problem.signature;
        return fmt::format("{}x{}/{}x{}x{},d={}/{},{}{}{}{},score_mod={}", problem.batch, problem.heads,
                           problem.kv_heads, problem.seq_q, problem.seq_kv, s.head_dim_qk, s.head_dim_v,
                           dtype_name(s.dtype), s.causal ? ",causal" : "", problem.varlen() ? ",varlen" : "",
                           s.lse ? ",lse" : "", s.score_mod.text());
      },
      spec.name(), [&] { return config == CpuAttentionConfig::default_for(problem, impl_->target); }, built_now,
      kernel.origin(), requested);
  return kernel;
}

void Runtime::attention(const AttentionArgs& args) {
  const AttentionProblem problem = describe(args);
  if (problem.signature.dtype == DType::f16)
    throw InvalidArgument("q", "is f16; the CPU attention kernel takes f32 or bf16 (f16 runs on CUDA targets)");
  compile(problem).run(args);
}

std::string attention_llvm_ir(const CpuAttentionSpec& spec, int ir_opt_level) {
  return OrcSession::ir_text(cpu_module_source(spec), checked_ir_opt_level(ir_opt_level));
}

std::string attention_host_assembly(const CpuAttentionSpec& spec, int ir_opt_level) {
  return OrcSession::assembly(cpu_module_source(spec), checked_ir_opt_level(ir_opt_level));
}

}  // namespace tessera
