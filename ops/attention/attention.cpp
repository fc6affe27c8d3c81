#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <new>

#include "generator/attention/attention_json.hpp"
#include "generator/llvm/attention_emitter.hpp"
#include "ops/attention/attention_binding.hpp"
#include "ops/attention/key_chunks.hpp"
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
// Where each head's K and V start in the packed buffer: heads (b, g) in order, ceil(kv_len(b) / block_kv) blocks each.
std::vector<std::int64_t> packed_head_offsets(const AttentionProblem& p, std::int64_t block_kv,
                                              std::int64_t block_floats) {
  std::vector<std::int64_t> offsets{0};
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t g = 0; g < p.kv_heads; ++g)
      offsets.push_back(offsets.back() + ceil_div(p.kv_len(b), block_kv) * block_floats);
  return offsets;
}

// Whether some head's keys are read by several query blocks (or query heads): then they are packed once, before.
bool packs_keys_first(const AttentionProblem& p, const CpuAttentionConfig& config) {
  if (config.in_place) return false;
  const bool stacked = stacks_query_heads(p, config.block_q);
  for (std::int64_t b = 0; b < p.batch; ++b)
    if ((p.q_len(b) > config.block_q || (p.heads > p.kv_heads && !stacked)) && p.q_len(b) > 0 && p.kv_len(b) > 0)
      return true;
  return false;
}

// Blocks (kernel calls before any key split) of batch item b: query heads × query blocks, or its KV heads stacked.
std::int64_t blocks_of_item(const AttentionProblem& p, std::int64_t b, int block_q, bool stacked) {
  return stacked ? p.kv_heads * (p.q_len(b) > 0) : p.heads * ceil_div(p.q_len(b), block_q);
}

}  // namespace

std::int64_t AttentionKernel::memory_bytes(const AttentionProblem& problem, int threads) const {
  const CpuAttentionSpec& spec = compiled_->spec;
  std::int64_t bytes = workspace_bytes() * std::max(1, threads);
  if (packs_keys_first(problem, spec.config))
    bytes += 4 * packed_head_offsets(problem, spec.config.block_kv,
                                     spec.config.packed_block_floats(spec.signature, spec.target))
                     .back();
  // Split keys (decoding): each chunk's output and LSE rows, at most one chunk per key block.
  if (spec.config.in_place) {
    const bool stacked = stacks_query_heads(problem, spec.config.block_q);
    for (std::int64_t b = 0; b < problem.batch; ++b)
      bytes += 4 * blocks_of_item(problem, b, spec.config.block_q, stacked) *
               ceil_div(problem.kv_len(b), spec.config.block_kv) * spec.config.block_q *
               (spec.signature.head_dim_v + 1);
  }
  return bytes;
}

void AttentionKernel::run(const AttentionArgs& args) const {
  const AttentionBinding bound = bind_attention(args);
  const AttentionProblem& p = bound.problem;
  const CpuAttentionSpec& spec = compiled_->spec;
  if (!(p.signature == spec.signature))
    throw InvalidArgument("args", "describe a different signature than this kernel was compiled for:\n  kernel: " +
                                      to_json(spec.signature).dump() + "\n  args:   " + to_json(p.signature).dump());
  const int block_q = spec.config.block_q, block_kv = spec.config.block_kv;
  // Tasks are (batch item, head, query block), batch items in order; blocks_before[b] counts the tasks before b.
  // Stacked (grouped-query decoding): (batch item, KV head), the group's query heads the rows of one block.
  const bool stacked = stacks_query_heads(p, block_q);
  std::vector<std::int64_t> blocks_before{0};
  for (std::int64_t b = 0; b < p.batch; ++b)
    blocks_before.push_back(blocks_before.back() + blocks_of_item(p, b, block_q, stacked));
  const std::int64_t tasks = blocks_before.back();
  if (tasks == 0) return;
  auto& impl = *static_cast<Runtime::Impl*>(runtime_.get());
  const int participants = args.threads ? std::min(args.threads, impl.threads) : impl.threads;

  // Keys read by several query blocks (or heads) are packed once, in parallel, instead of once per block.
  const std::int64_t block_floats = spec.config.packed_block_floats(spec.signature, spec.target);
  std::vector<std::int64_t> head_at;
  std::unique_ptr<float[]> packed;
  if (packs_keys_first(p, spec.config)) {
    head_at = packed_head_offsets(p, block_kv, block_floats);
    packed.reset(new (std::align_val_t(64)) float[static_cast<std::size_t>(head_at.back())]);
    const std::int64_t heads = p.batch * p.kv_heads;
    std::vector<std::int64_t> pack_before{0};  // pack tasks before head (b, g)
    for (std::int64_t h = 0; h < heads; ++h) pack_before.push_back(head_at[h + 1] / block_floats);
    run_tasks(impl.pool, participants, pack_before.back(), 0, [&](std::int64_t t, void*) {
      const auto head =
          static_cast<std::int64_t>(std::upper_bound(pack_before.begin(), pack_before.end(), t) - pack_before.begin()) -
          1;
      const std::int64_t b = head / p.kv_heads, g = head % p.kv_heads;
      // The K and V of KV head g: those of its first query head.
      const AttentionBlockArgs a = block_args(bound, b, g * (p.heads / p.kv_heads), 0, block_q);
      const std::int64_t block = t - pack_before[static_cast<std::size_t>(head)];
      compiled_->pack(&a, block, packed.get() + head_at[static_cast<std::size_t>(head)] + block * block_floats);
    });
  }

  // The call for block k of batch item b (its blocks in order: query heads and blocks, or stacked KV heads).
  const auto block_call = [&](std::int64_t b, std::int64_t k) {
    AttentionBlockArgs a;
    if (stacked) {
      a = stacked_block_args(bound, b, k);
    } else {
      const std::int64_t blocks = ceil_div(p.q_len(b), block_q);
      const std::int64_t h = k / blocks;
      a = block_args(bound, b, h, k % blocks, block_q);
      if (packed)
        a.kv_packed = packed.get() + head_at[static_cast<std::size_t>(b * p.kv_heads + h / (p.heads / p.kv_heads))];
    }
    skip_masked_key_blocks(a, p.signature.score_mod, block_kv);
    return a;
  };
  const auto batch_item = [](const std::vector<std::int64_t>& before, std::int64_t t) {
    return static_cast<std::int64_t>(std::upper_bound(before.begin(), before.end(), t) - before.begin()) - 1;
  };
  const AttentionKernelFn fn = compiled_->fn;
  const auto scratch_bytes = static_cast<std::size_t>(workspace_bytes());
  const std::int64_t chunk_keys = key_chunk_length(bound, spec.config, tasks, participants);
  if (chunk_keys == 0) {
    run_tasks(impl.pool, participants, tasks, scratch_bytes, [&](std::int64_t t, void* scratch) {
      const std::int64_t b = batch_item(blocks_before, t);
      const AttentionBlockArgs a = block_call(b, t - blocks_before[static_cast<std::size_t>(b)]);
      fn(&a, scratch);
    });
    return;
  }

  // Split keys: batch item b runs chunk c of its block k as task split_before[b] + c·blocks(b) + k (a chunk's blocks
  // together, so that interleaved heads share the chunk's pages), into f32 scratch, merged per block after.
  const auto chunks = [&](std::int64_t b) { return std::max<std::int64_t>(1, ceil_div(p.kv_len(b), chunk_keys)); };
  const auto blocks_of = [&](std::int64_t b) { return blocks_before[b + 1] - blocks_before[b]; };
  std::vector<std::int64_t> split_before{0};
  for (std::int64_t b = 0; b < p.batch; ++b) split_before.push_back(split_before.back() + blocks_of(b) * chunks(b));
  const std::int64_t dv = p.signature.head_dim_v;
  std::vector<float> o_parts(static_cast<std::size_t>(split_before.back() * block_q * dv));
  std::vector<float> lse_parts(static_cast<std::size_t>(split_before.back() * block_q));
  run_tasks(impl.pool, participants, split_before.back(), scratch_bytes, [&](std::int64_t t, void* scratch) {
    const std::int64_t b = batch_item(split_before, t);
    const std::int64_t within = t - split_before[static_cast<std::size_t>(b)];
    const std::int64_t c = within / blocks_of(b);
    AttentionBlockArgs a = block_call(b, within % blocks_of(b));
    a.kv_begin = std::max(a.kv_begin, c * chunk_keys);
    a.kv_stop = std::max(a.kv_begin, std::min(a.kv_stop, (c + 1) * chunk_keys));
    aim_at_chunk_scratch(a, o_parts.data() + t * block_q * dv, lse_parts.data() + t * block_q, dv);
    fn(&a, scratch);
  });
  run_tasks(impl.pool, participants, tasks, 0, [&](std::int64_t t, void*) {
    const std::int64_t b = batch_item(blocks_before, t);
    const std::int64_t k = t - blocks_before[static_cast<std::size_t>(b)];
    const std::int64_t first = split_before[static_cast<std::size_t>(b)] + k;  // chunk 0's task
    merge_key_chunks(block_call(b, k), chunks(b), o_parts.data() + first * block_q * dv, blocks_of(b) * block_q * dv,
                     lse_parts.data() + first * block_q, blocks_of(b) * block_q, dv, p.signature.dtype);
  });
}

AttentionProblem describe_attention(const AttentionArgs& args) { return bind_attention(args).problem; }

CpuAttentionConfig Runtime::choose_config(const AttentionProblem& problem) {
  if (impl_->options.tuning_budget <= 0) return CpuAttentionConfig::default_for(problem, impl_->target);
  // Tuned once per shape: the signature, the sizes and the lengths.
  std::string key = to_json(problem.signature).dump() + fmt::format("|{}x{}/{}x{}x{}", problem.batch, problem.heads,
                                                                    problem.kv_heads, problem.seq_q, problem.seq_kv);
  for (std::size_t b = 0; b < problem.seq_lens_q.size(); ++b)
    key += fmt::format("|{}:{}", problem.seq_lens_q[b], problem.seq_lens_kv[b]);
  {
    std::lock_guard lock(impl_->choices_mutex);
    if (auto it = impl_->attention_choices.find(key); it != impl_->attention_choices.end()) return it->second;
  }
  TuneOptions options;
  options.top_k = impl_->options.tuning_budget;
  const AttentionTuneResult r = tune_attention(*this, problem, options);
  const CpuAttentionConfig config =
      r.measured.empty() ? CpuAttentionConfig::default_for(problem, impl_->target) : r.measured[r.best].config;
  std::lock_guard lock(impl_->choices_mutex);
  return impl_->attention_choices.emplace(key, config).first->second;
}

AttentionKernel Runtime::compile(const AttentionProblem& problem) { return compile(problem, choose_config(problem)); }

AttentionKernel Runtime::compile(const AttentionProblem& problem, const CpuAttentionConfig& config) {
  const auto requested = std::chrono::steady_clock::now();
  const CpuAttentionSpec spec{problem.signature, config, impl_->target};
  validate(spec.signature, spec.config, spec.target);
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
