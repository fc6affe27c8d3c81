// Fused attention on a CUDA backend: the arguments bound as on the CPU, the FlashAttention-2 kernel built once per
// spec, one block per (query block, head, key split) and batch item, then (split keys) the merge of the splits.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numbers>
#include <optional>
#include <span>

#include "generator/attention/attention_json.hpp"
#include "generator/core/arith.hpp"
#include "generator/cuda/attention_source.hpp"
#include "jit/nvrtc.hpp"
#include "ops/attention/attention_binding.hpp"
#include "ops/cuda/cuda_runtime_impl.hpp"
#include "tessera/attention/attention_params.cuh"

namespace tessera {

namespace {

// The widest row alignment (elements, at most 8 = 16 bytes) every row of Q, K and V allows.
int allowed_alignment(const AttentionBinding& bound) {
  int align = 8;
  for (const AttentionView* view : {&bound.q, &bound.k, &bound.v, &bound.o}) {
    const auto address = reinterpret_cast<std::uintptr_t>(view->data);
    while (align > 1 && (address % static_cast<std::uintptr_t>(2 * align) != 0 || view->seq % align != 0 ||
                         view->head % align != 0 || view->batch % align != 0))
      align /= 2;
  }
  return align;
}

// The bytes a view spans, for the emulator's bounds checks.
EmuMemoryRange extent_of(const Tensor& t) {
  std::int64_t last = 0;
  for (std::size_t d = 0; d < t.rank(); ++d) last += (t.shape[d] > 0 ? t.shape[d] - 1 : 0) * t.strides[d];
  return {t.data, static_cast<std::size_t>((last + 1) * dtype_bytes(t.dtype))};
}

// Decoding with grouped query heads: one query a head, so the G query heads that share a KV head are launched as one
// sequence of G rows (row g at the head stride), and each block of K and V is read once per group instead of once
// per head (MQA: once instead of H times). Only where nothing tells those rows apart from positions: no varlen, no
// score modifier (it may read i or h), the LSE contiguous across heads; one query sees every key, so causal masks
// nothing and the stacked launch runs unmasked.
bool stacks_query_heads(const AttentionBinding& bound) {
  const AttentionProblem& p = bound.problem;
  return p.seq_q == 1 && !p.varlen() && p.heads > p.kv_heads && p.signature.score_mod.is_identity() &&
         (!bound.lse || bound.lse_head == 1);
}

// The problem the kernel is launched for: the call's, or its query heads stacked per KV head.
AttentionProblem launched_problem(const AttentionBinding& bound) {
  AttentionProblem p = bound.problem;
  if (!stacks_query_heads(bound)) return p;
  p.seq_q = p.heads / p.kv_heads;
  p.heads = p.kv_heads;
  p.signature.causal = false;
  return p;
}

// A tensor's TMA map for the wgmma kernel: (head dimension, rows, planes), boxes of 64 columns × box_rows, 128-byte
// swizzle, and where batch item b starts in it: row b·rows_per_batch, plane b·planes_per_batch + head. The batch
// folds into the planes (BHSD: its stride is the heads') or the rows (BSHD: its stride is the sequence's); a packed
// varlen batch is one sequence of all rows. None where neither holds or TMA cannot address the view (a start or a
// stride not a multiple of 16 bytes).
struct FlashMap {
  TmaTensor tensor;
  int rows_per_batch = 0, planes_per_batch = 0;
};

std::optional<FlashMap> flash_map(const AttentionView& view, std::int64_t batch, std::int64_t heads, std::int64_t seq,
                                  std::int64_t d, bool varlen, int box_rows) {
  const auto bytes = [&](std::int64_t elements) { return elements * view.element_bytes; };
  if (reinterpret_cast<std::uintptr_t>(view.data) % 16 != 0 || seq <= 0 || heads <= 0 || batch <= 0) return {};
  // A dimension of one index needs no real stride: a dense one stands in (TMA wants multiples of 16 bytes).
  const std::int64_t seq_stride = seq == 1 ? d : view.seq;
  const std::int64_t head_stride = heads == 1 ? seq * seq_stride : view.head;
  FlashMap m;
  std::int64_t rows = seq, planes = heads;
  if (varlen || batch == 1) {
  } else if (view.batch == heads * head_stride) {
    planes = batch * heads, m.planes_per_batch = static_cast<int>(heads);
  } else if (view.batch == seq * seq_stride) {
    rows = batch * seq, m.rows_per_batch = static_cast<int>(seq);
  } else {
    return {};
  }
  if (bytes(seq_stride) % 16 != 0 || bytes(head_stride) % 16 != 0 || seq_stride <= 0 || head_stride <= 0 ||
      rows >= (std::int64_t{1} << 31) || planes >= (std::int64_t{1} << 31))
    return {};
  m.tensor.global = view.data;
  m.tensor.element_bytes = static_cast<unsigned>(view.element_bytes);
  m.tensor.dims = {static_cast<std::uint64_t>(d), static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(planes)};
  m.tensor.stride_bytes = {static_cast<std::uint64_t>(bytes(seq_stride)),
                           static_cast<std::uint64_t>(bytes(head_stride))};
  m.tensor.box = {64, static_cast<unsigned>(box_rows), 1};
  m.tensor.swizzle_bytes = 128;
  return m;
}

// The wgmma kernel's maps of Q, K and V for a launch of `p` with `config`, or none where one view cannot be mapped.
std::optional<std::array<FlashMap, 3>> flash_maps(const AttentionBinding& bound, const AttentionProblem& p,
                                                  const CudaAttentionConfig& config) {
  const std::int64_t q_rows = p.varlen() ? bound.offsets_q.back() : p.seq_q;
  const std::int64_t kv_rows = p.varlen() ? bound.offsets_kv.back() : p.seq_kv;
  const std::int64_t d = p.signature.head_dim_qk;
  AttentionView q_view = bound.q;
  if (p.heads != bound.problem.heads) {  // query heads stacked: a KV head's query heads are its rows
    q_view.seq = bound.q.head;
    q_view.head = p.seq_q * bound.q.head;
  }
  auto q = flash_map(q_view, p.batch, p.heads, q_rows, d, p.varlen(), config.block_q());
  auto k = flash_map(bound.k, p.batch, p.kv_heads, kv_rows, d, p.varlen(), config.block_kv);
  auto v = flash_map(bound.v, p.batch, p.kv_heads, kv_rows, d, p.varlen(), config.block_kv);
  if (!q || !k || !v) return {};
  return std::array<FlashMap, 3>{*q, *k, *v};
}

// The config a launch uses, its key splits and the device memory it needs beyond the tensors.
struct Footprint {
  CudaAttentionConfig config;
  int splits = 1;
  std::int64_t rows = 0;  // rows of the partial buffers: batch·seq_q, or the packed rows of a varlen batch
  std::size_t offsets_bytes = 0, o_partial_bytes = 0, lse_partial_bytes = 0;
};

Footprint footprint(const AttentionBinding& bound, const AttentionProblem& p, const AttentionArgs& args,
                    const CudaTarget& target, std::optional<CudaAttentionConfig> asked) {
  Footprint f;
  f.config = asked ? *asked : CudaAttentionConfig::default_for(p, target);
  f.config.align = std::min(f.config.align, allowed_alignment(bound));
  // The wgmma kernel reads Q, K and V by TMA and stores O in 16-byte chunks: views it cannot take get the mma.sync
  // kernel, unless the caller asked for wgmma.
  if (f.config.wgmma && (f.config.align < 8 || !flash_maps(bound, p, f.config))) {
    if (asked)
      throw InvalidArgument("args",
                            "the wgmma attention kernel needs Q, K and V mappable by TMA (16-byte aligned "
                            "starts and strides, the batch folding into heads or rows) and 16-byte aligned rows");
    f.config = CudaAttentionConfig::mma_sync_default(p);
    f.config.align = std::min(f.config.align, allowed_alignment(bound));
  }
  if (p.varlen()) f.offsets_bytes = (args.seq_offsets_q.size() + args.seq_offsets_kv.size()) * sizeof(std::int64_t);
  f.splits = f.config.key_splits(p, target);
  if (f.splits > 1) {
    f.rows = p.varlen() ? args.seq_offsets_q.back() : p.batch * p.seq_q;
    const auto row_count = static_cast<std::size_t>(f.splits * p.heads * f.rows);
    f.o_partial_bytes = row_count * static_cast<std::size_t>(p.signature.head_dim_v) * sizeof(float);
    f.lse_partial_bytes = row_count * sizeof(float);
  }
  return f;
}

struct AttentionLaunch {
  std::shared_ptr<const CudaProgram> program;
  std::shared_ptr<void> offsets;     // varlen: the offsets in device memory, freed after the device is done with them
  DeviceScratch* scratch = nullptr;  // split keys: the splits' rows (f32 O, then the LSE) go there at launch
  std::size_t o_partial_bytes = 0, partial_bytes = 0;
  std::string kernel, combine_kernel;
  AttentionParams params{};
  unsigned grid_x = 0, grid_z = 0, block = 0, shared_bytes = 0;
  unsigned splits = 1;
  std::vector<EmuMemoryRange> extents;
  std::vector<TmaTensor> tma;  // the wgmma kernel's Q, K and V maps, encoded at the launch
};

AttentionLaunch plan(const CudaBackend& backend, KernelCache<CudaProgram>& programs, DeviceScratch& scratch,
                     const AttentionArgs& args, std::optional<CudaAttentionConfig> asked) {
  const AttentionBinding bound = bind_attention(args);
  const AttentionProblem p = launched_problem(bound);
  const CudaTarget& target = backend.target();
  const Footprint needs = footprint(bound, p, args, target, asked);
  const CudaAttentionConfig& config = needs.config;
  const CudaAttentionSpec spec{p.signature, config, target};
  try {
    validate(spec.signature, spec.config, spec.target);
  } catch (const ConfigError& e) {
    throw InvalidArgument("args", e.what());  // what the call asks is what this kernel cannot do
  }
  AttentionLaunch launch;
  launch.kernel = spec.name();
  launch.combine_kernel = spec.combine_name();
  launch.program = programs.get_or_build(spec.hash(), [&] {
    const CudaAttentionSource source = emit_cuda_attention(spec);
    return backend.load_source(source.code, source.kernel);
  });
  AttentionParams& k = launch.params;
  k.q = bound.q.data, k.k = bound.k.data, k.v = bound.v.data, k.o = const_cast<std::byte*>(bound.o.data);
  k.lse = bound.lse;
  k.q_bs = bound.q.batch, k.q_hs = bound.q.head, k.q_ss = bound.q.seq;
  k.k_bs = bound.k.batch, k.k_hs = bound.k.head, k.k_ss = bound.k.seq;
  k.v_bs = bound.v.batch, k.v_hs = bound.v.head, k.v_ss = bound.v.seq;
  k.o_bs = bound.o.batch, k.o_hs = bound.o.head, k.o_ss = bound.o.seq;
  k.lse_bs = bound.lse_batch, k.lse_hs = bound.lse_head;
  if (bound.lse && bound.lse_seq != 1) throw InvalidArgument("lse", "the CUDA kernel writes a contiguous row per head");
  if (p.heads != bound.problem.heads) {  // query heads stacked: a group's heads are its rows
    const std::int64_t group = p.seq_q;
    k.q_ss = bound.q.head, k.q_hs = group * bound.q.head;
    k.o_ss = bound.o.head, k.o_hs = group * bound.o.head;
    k.lse_hs = group * bound.lse_head;
  }
  const std::int64_t limit = (std::int64_t{1} << 31) - 1;
  if (p.seq_q > limit || p.seq_kv > limit || p.heads > limit)
    throw InvalidArgument("q", "CUDA kernels take sequences and heads below 2^31");
  if (p.varlen()) {
    // Both offset lists in one device buffer, freed once the device is done with every launch of this plan.
    std::vector<std::int64_t> offsets = args.seq_offsets_q;
    offsets.insert(offsets.end(), args.seq_offsets_kv.begin(), args.seq_offsets_kv.end());
    const std::size_t bytes = needs.offsets_bytes;
    const std::uint64_t address = backend.allocate(bytes);
    backend.copy_to_device(address, offsets.data(), bytes);
    launch.offsets = std::shared_ptr<void>(reinterpret_cast<void*>(address), [&backend](void* memory) {
      backend.synchronize();
      backend.free(reinterpret_cast<std::uint64_t>(memory));
    });
    k.q_offsets = static_cast<const i64*>(launch.offsets.get());
    k.kv_offsets = k.q_offsets + args.seq_offsets_q.size();
    launch.extents.push_back({launch.offsets.get(), bytes});
  }
  k.batch = static_cast<int>(p.batch), k.heads = static_cast<int>(p.heads), k.kv_heads = static_cast<int>(p.kv_heads);
  k.seq_q = static_cast<int>(p.seq_q), k.seq_kv = static_cast<int>(p.seq_kv);
  k.scale = bound.scale;
  k.scale_log2 = bound.scale * static_cast<float>(std::numbers::log2e);
  for (std::size_t t = 0; t < bound.tensors.size(); ++t) {
    k.mod_data[t] = bound.tensors[t].data;
    for (int d = 0; d < 4; ++d) k.mod_strides[t][d] = bound.tensors[t].strides[d];
  }
  for (std::size_t i = 0; i < bound.scalars.size(); ++i) k.mod_scalars[i] = bound.scalars[i];
  const std::int64_t grid_x = ceil_div(p.seq_q, config.block_q()) * p.heads;
  if (grid_x > limit) throw InvalidArgument("q", "too many query blocks for one grid");
  if (p.batch > 65535) throw InvalidArgument("q", "batch exceeds the grid's 65535 z-blocks");
  launch.grid_x = static_cast<unsigned>(grid_x);
  launch.grid_z = static_cast<unsigned>(p.batch);
  // Split keys: every split's rows as f32 O and LSE, [split][head][row] with a row's index b·seq_q + i (varlen: its
  // packed row).
  launch.splits = static_cast<unsigned>(needs.splits);
  if (launch.splits > 1) {
    if (grid_x * launch.splits > limit) throw InvalidArgument("q", "too many query blocks and key splits for one grid");
    launch.scratch = &scratch;
    launch.o_partial_bytes = needs.o_partial_bytes;
    launch.partial_bytes = needs.o_partial_bytes + needs.lse_partial_bytes;
    k.partial_bs = p.varlen() ? 0 : p.seq_q;
    k.partial_rows = needs.rows;
    k.kv_splits = needs.splits;
    k.kv_chunk = static_cast<int>(config.split_keys(p, needs.splits));
  }
  if (config.wgmma) {
    const std::array<FlashMap, 3> maps = *flash_maps(bound, p, config);
    for (int t = 0; t < 3; ++t) {
      launch.tma.push_back(maps[static_cast<std::size_t>(t)].tensor);
      k.tma_rows[t] = maps[static_cast<std::size_t>(t)].rows_per_batch;
      k.tma_planes[t] = maps[static_cast<std::size_t>(t)].planes_per_batch;
    }
  }
  launch.block = static_cast<unsigned>(config.threads());
  launch.shared_bytes = static_cast<unsigned>(config.shared_bytes(p.signature));
  for (const Tensor* t : {&args.q, &args.k, &args.v, &args.o}) launch.extents.push_back(extent_of(*t));
  if (!args.lse.empty()) launch.extents.push_back(extent_of(args.lse));
  for (const auto& [name, tensor] : args.tensors) launch.extents.push_back(extent_of(tensor));
  return launch;
}

void run(const CudaBackend& backend, const AttentionLaunch& launch) {
  if (launch.grid_x == 0 || launch.grid_z == 0) return;
  if (!launch.tma.empty()) {
    AttentionParams k = launch.params;
    TmaDescriptor* maps[3] = {&k.q_map, &k.k_map, &k.v_map};
    for (std::size_t i = 0; i < launch.tma.size(); ++i)
      std::memcpy(maps[i], launch.program->tma_descriptors.get(backend, launch.tma[i]).data(), sizeof(TmaDescriptor));
    launch.program->launch(launch.kernel, launch.grid_x, launch.grid_z, launch.block, launch.shared_bytes,
                           std::as_bytes(std::span(&k, 1)), launch.extents);
    return;
  }
  if (launch.splits <= 1) {
    launch.program->launch(launch.kernel, launch.grid_x, launch.grid_z, launch.block, launch.shared_bytes,
                           std::as_bytes(std::span(&launch.params, 1)), launch.extents);
    return;
  }
  // The splits' rows in the runtime's scratch, held until the merge that reads them is launched.
  std::lock_guard lock(launch.scratch->mutex);
  void* partials = launch.scratch->reserve(backend, launch.partial_bytes);
  AttentionParams k = launch.params;
  k.o_partial = static_cast<float*>(partials);
  k.lse_partial = k.o_partial + launch.o_partial_bytes / sizeof(float);
  std::vector<EmuMemoryRange> extents = launch.extents;
  extents.push_back({partials, launch.partial_bytes});
  const auto params = std::as_bytes(std::span(&k, 1));
  launch.program->launch(launch.kernel, launch.grid_x * launch.splits, launch.grid_z, launch.block, launch.shared_bytes,
                         params, extents);
  launch.program->launch(launch.combine_kernel, launch.grid_x, launch.grid_z, launch.block, 0, params, extents);
}

}  // namespace

void CudaRuntime::attention(const AttentionArgs& device_args, std::optional<CudaAttentionConfig> config) {
  run(*impl_->backend, plan(*impl_->backend, impl_->programs, impl_->scratch, device_args, config));
}

CudaAttentionLaunchPlan CudaRuntime::attention_plan(const AttentionArgs& device_args,
                                                    std::optional<CudaAttentionConfig> config) const {
  const AttentionBinding bound = bind_attention(device_args);
  const AttentionProblem p = launched_problem(bound);
  const CudaTarget& target = impl_->backend->target();
  const Footprint needs = footprint(bound, p, device_args, target, config);
  try {
    validate(p.signature, needs.config, target);
  } catch (const ConfigError& e) {
    throw InvalidArgument("args", e.what());
  }
  return {CudaAttentionSpec{p.signature, needs.config, target}.name(), needs.config, needs.splits,
          static_cast<std::int64_t>(needs.offsets_bytes + needs.o_partial_bytes + needs.lse_partial_bytes),
          p.heads != bound.problem.heads};
}

double CudaRuntime::attention_ms(const AttentionArgs& device_args, int repeat,
                                 std::optional<CudaAttentionConfig> config) {
  const AttentionLaunch launch = plan(*impl_->backend, impl_->programs, impl_->scratch, device_args, config);
  run(*impl_->backend, launch);
  std::vector<double> times;
  for (int i = 0; i < std::max(1, repeat); ++i)
    times.push_back(impl_->backend->time_ms([&] { run(*impl_->backend, launch); }));
  return median(std::move(times));
}

CudaCode generate_cuda_attention(const CudaAttentionSpec& spec, bool cubin) {
  const CudaAttentionSource source = emit_cuda_attention(spec);
  const CudaBinary binary = Nvrtc::instance().compile(source.code, source.kernel, spec.target, cubin);
  nlohmann::json report = kernel_report(source.kernel, spec.target, source.threads, source.shared_bytes, binary);
  report["config"] = to_json(spec.config);
  report["spec_hash"] = spec.hash().hex();
  return {source.code, binary.ptx, report.dump()};
}

}  // namespace tessera
