// SpMM and SDDMM on a CUDA backend: the arguments bound as on the CPU (device arrays are not read: the host plan
// vouches for the pattern), Sputnik's CSR kernels built once per spec, one warp per row in the plan's row order.
#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "generator/core/arith.hpp"
#include "generator/cuda/sparse_source.hpp"
#include "generator/gemm/gemm_json.hpp"
#include "generator/sparse/sparse_json.hpp"
#include "jit/nvrtc.hpp"
#include "ops/cuda/cuda_runtime_impl.hpp"
#include "ops/sparse/sparse_binding.hpp"
#include "tessera/sparse/sparse_params.cuh"

namespace tessera {

namespace {

constexpr std::int64_t kGridLimit = (std::int64_t{1} << 31) - 1;

// The widest vector (elements, at most 4) that a row-major operand's rows and its base are aligned to.
int allowed_vec(const TensorArg& t, DType dtype, int vec) {
  const auto address = reinterpret_cast<std::uintptr_t>(t.data);
  while (vec > 1 && (address % static_cast<std::uintptr_t>(vec * dtype_bytes(dtype)) != 0 || t.rs % vec != 0)) vec /= 2;
  return vec;
}

TensorRef ref(const TensorArg& t) { return {t.data, t.rs, t.cs, t.bs}; }

EmuMemoryRange matrix_extent(const TensorArg& t, std::int64_t rows, std::int64_t cols, DType dtype) {
  if (rows == 0 || cols == 0 || t.data == nullptr) return {t.data, 0};
  return {t.data, static_cast<std::size_t>(((rows - 1) * t.rs + (cols - 1) * t.cs + 1) * dtype_bytes(dtype))};
}

std::vector<EmuMemoryRange> pattern_extents(const SparseMatrix& m) {
  const auto index = static_cast<std::size_t>(m.index_bits / 8);
  return {{m.row_offsets, static_cast<std::size_t>(m.block_row_count() + 1) * index},
          {m.col_indices, static_cast<std::size_t>(m.entries) * index},
          {m.values, static_cast<std::size_t>(m.entries) * static_cast<std::size_t>(m.block_rows) *
                         static_cast<std::size_t>(m.block_cols) * static_cast<std::size_t>(dtype_bytes(m.value))}};
}

struct SparseLaunch {
  std::shared_ptr<const CudaProgram> program;
  std::shared_ptr<void> row_order;  // in device memory, freed once the device is done with every launch
  std::string kernel;
  SparseParams params{};
  unsigned grid_x = 0, grid_z = 1, block = 0, shared_bytes = 0;
  std::vector<EmuMemoryRange> extents;
};

// The plan's row order in device memory.
void upload_row_order(const CudaBackend& backend, const SparsePlan& plan, SparseLaunch& launch) {
  const std::vector<std::int32_t>& order = plan.row_order();
  if (order.empty()) return;
  const std::size_t bytes = order.size() * sizeof(std::int32_t);
  const std::uint64_t address = backend.allocate(bytes);
  backend.copy_to_device(address, order.data(), bytes);
  launch.row_order = std::shared_ptr<void>(reinterpret_cast<void*>(address), [&backend](void* memory) {
    backend.synchronize();
    backend.free(reinterpret_cast<std::uint64_t>(memory));
  });
  launch.params.row_order = static_cast<const int*>(launch.row_order.get());
  launch.extents.push_back({launch.row_order.get(), bytes});
}

template <class Spec>
std::shared_ptr<const CudaProgram> program_of(const CudaBackend& backend, KernelCache<CudaProgram>& programs,
                                              const Spec& spec) {
  try {
    validate(spec.signature, spec.config, spec.target);
  } catch (const ConfigError& e) {
    throw InvalidArgument("args", e.what());  // what the call asks is what this kernel cannot do
  }
  return programs.get_or_build(spec.hash(), [&] {
    const CudaSparseSource source = [&] {
      if constexpr (std::is_same_v<Spec, CudaSpmmSpec>)
        return emit_cuda_spmm(spec);
      else
        return emit_cuda_sddmm(spec);
    }();
    return backend.load_source(source.code, source.kernel);
  });
}

void fill_inputs(GemmParams& dense, const std::vector<TensorArg>& inputs) {
  if (inputs.size() > static_cast<std::size_t>(kMaxEpilogueInputs))
    throw InvalidArgument("inputs", fmt::format("at most {} epilogue tensors on CUDA", int{kMaxEpilogueInputs}));
  for (std::size_t i = 0; i < inputs.size(); ++i) dense.inputs[i] = ref(inputs[i]);
}

SparseLaunch plan_spmm(const CudaBackend& backend, KernelCache<CudaProgram>& programs, const SpmmArgs& args,
                       std::optional<CudaSparseConfig> asked) {
  const SpmmBinding bound = bind_spmm(args, 1, Residence::Device);
  const SpmmProblem& p = bound.problem;
  if (p.m > kGridLimit || p.n > kGridLimit || p.k > kGridLimit)
    throw InvalidArgument("a", "CUDA sparse kernels take sides below 2^31");
  CudaSparseConfig config = asked ? *asked : cuda_spmm_default(p);
  const SpmmKernelArgs& k = bound.args;
  const bool blocks = p.signature.a.format == SparseFormat::Bsr;
  if (!blocks) config.vec = allowed_vec(k.d, DType::f32, allowed_vec(k.b, p.signature.dense.b.dtype, config.vec));
  const CudaSpmmSpec spec{p.signature, config, backend.target()};
  SparseLaunch launch;
  launch.program = program_of(backend, programs, spec);
  launch.kernel = spec.name();
  GemmParams& dense = launch.params.dense;
  dense.m = static_cast<int>(p.m), dense.n = static_cast<int>(p.n), dense.k = static_cast<int>(p.k), dense.batch = 1;
  dense.b = ref(k.b), dense.c = ref(k.c), dense.d = ref(k.d);
  dense.alpha = k.alpha, dense.beta = k.beta;
  fill_inputs(dense, bound.inputs);
  launch.params.row_offsets = k.row_offsets;
  launch.params.col_indices = k.col_indices;
  launch.params.values = k.values;
  const std::int64_t rows = args.a.block_row_count();
  launch.params.rows = static_cast<int>(rows);
  upload_row_order(backend, *bound.plan, launch);
  const std::int64_t tiles = ceil_div(p.n, blocks ? 8 * config.tiles : 32 * config.vec);
  if (tiles > 65535) throw InvalidArgument("b", "N exceeds what one grid's 65535 z-blocks cover");
  launch.grid_x = static_cast<unsigned>(ceil_div(rows, config.warps));
  launch.grid_z = static_cast<unsigned>(tiles);
  launch.block = static_cast<unsigned>(config.threads());
  launch.shared_bytes = blocks ? 0u : static_cast<unsigned>(spmm_shared_bytes(config));
  for (const auto& e : pattern_extents(args.a)) launch.extents.push_back(e);
  launch.extents.push_back(matrix_extent(k.b, p.k, p.n, p.signature.dense.b.dtype));
  launch.extents.push_back(matrix_extent(k.d, p.m, p.n, DType::f32));
  if (p.signature.dense.c.layout.reads_memory()) launch.extents.push_back(matrix_extent(k.c, p.m, p.n, DType::f32));
  for (const auto& [name, tensor] : args.inputs) {
    std::int64_t last = 0;
    for (std::size_t d = 0; d < tensor.rank(); ++d)
      last += (tensor.shape[d] > 0 ? tensor.shape[d] - 1 : 0) * tensor.strides[d];
    launch.extents.push_back({tensor.data, static_cast<std::size_t>((last + 1) * dtype_bytes(tensor.dtype))});
  }
  return launch;
}

SparseLaunch plan_sddmm(const CudaBackend& backend, KernelCache<CudaProgram>& programs, const SddmmArgs& args,
                        std::optional<CudaSparseConfig> asked) {
  const SddmmBinding bound = bind_sddmm(args, 1, Residence::Device);
  const SddmmProblem& p = bound.problem;
  if (p.m > kGridLimit || p.n > kGridLimit || p.k > kGridLimit)
    throw InvalidArgument("pattern", "CUDA sparse kernels take sides below 2^31");
  CudaSparseConfig config = asked ? *asked : cuda_sddmm_default(p);
  const SddmmKernelArgs& k = bound.args;
  config.vec = allowed_vec(k.b, p.signature.dense.b.dtype, config.vec);
  const CudaSddmmSpec spec{p.signature, config, backend.target()};
  SparseLaunch launch;
  launch.program = program_of(backend, programs, spec);
  launch.kernel = spec.name();
  GemmParams& dense = launch.params.dense;
  dense.m = static_cast<int>(p.m), dense.n = static_cast<int>(p.n), dense.k = static_cast<int>(p.k), dense.batch = 1;
  dense.a = ref(k.a), dense.b = ref(k.b);
  dense.alpha = k.alpha;
  fill_inputs(dense, bound.inputs);
  launch.params.row_offsets = k.row_offsets;
  launch.params.col_indices = k.col_indices;
  launch.params.values = k.values;
  launch.params.out = static_cast<float*>(k.out);
  launch.params.rows = static_cast<int>(p.m);
  upload_row_order(backend, *bound.plan, launch);
  launch.grid_x = static_cast<unsigned>(ceil_div(p.m, config.warps));
  launch.block = static_cast<unsigned>(config.threads());
  launch.shared_bytes = static_cast<unsigned>(sddmm_shared_bytes(config));
  for (const auto& e : pattern_extents(args.pattern)) launch.extents.push_back(e);
  launch.extents.push_back(matrix_extent(k.a, p.m, p.k, p.signature.dense.a.dtype));
  launch.extents.push_back(matrix_extent(k.b, p.n, p.k, p.signature.dense.b.dtype));
  launch.extents.push_back({k.out, static_cast<std::size_t>(args.pattern.entries) * 4});
  for (const auto& [name, tensor] : args.inputs) {
    const std::int64_t last =
        tensor.shape.empty() || tensor.shape[0] == 0 ? 0 : (tensor.shape[0] - 1) * tensor.strides[0];
    launch.extents.push_back({tensor.data, static_cast<std::size_t>((last + 1) * 4)});
  }
  return launch;
}

void run(const SparseLaunch& launch) {
  if (launch.grid_x == 0 || launch.grid_z == 0) return;
  launch.program->launch(launch.kernel, launch.grid_x, launch.grid_z, launch.block, launch.shared_bytes,
                         std::as_bytes(std::span(&launch.params, 1)), launch.extents);
}

double time_launch(const CudaBackend& backend, const SparseLaunch& launch, int repeat) {
  run(launch);
  std::vector<double> times;
  for (int i = 0; i < std::max(1, repeat); ++i) times.push_back(backend.time_ms([&] { run(launch); }));
  return median(std::move(times));
}

template <class Source>
CudaCode generate(const Source& source, const CudaTarget& target, const nlohmann::json& config, const Hash128& hash,
                  bool cubin) {
  const CudaBinary binary = Nvrtc::instance().compile(source.code, source.kernel, target, cubin);
  nlohmann::json report = kernel_report(source.kernel, target, source.threads, source.shared_bytes, binary);
  report["config"] = config;
  report["spec_hash"] = hash.hex();
  return {source.code, binary.ptx, report.dump()};
}

}  // namespace

void CudaRuntime::spmm(const SpmmArgs& device_args, std::optional<CudaSparseConfig> config) {
  run(plan_spmm(*impl_->backend, impl_->programs, device_args, config));
}

double CudaRuntime::spmm_ms(const SpmmArgs& device_args, int repeat, std::optional<CudaSparseConfig> config) {
  return time_launch(*impl_->backend, plan_spmm(*impl_->backend, impl_->programs, device_args, config), repeat);
}

void CudaRuntime::sddmm(const SddmmArgs& device_args, std::optional<CudaSparseConfig> config) {
  run(plan_sddmm(*impl_->backend, impl_->programs, device_args, config));
}

double CudaRuntime::sddmm_ms(const SddmmArgs& device_args, int repeat, std::optional<CudaSparseConfig> config) {
  return time_launch(*impl_->backend, plan_sddmm(*impl_->backend, impl_->programs, device_args, config), repeat);
}

CudaCode generate_cuda_spmm(const CudaSpmmSpec& spec, bool cubin) {
  return generate(emit_cuda_spmm(spec), spec.target, to_json(spec.config), spec.hash(), cubin);
}

CudaCode generate_cuda_sddmm(const CudaSddmmSpec& spec, bool cubin) {
  return generate(emit_cuda_sddmm(spec), spec.target, to_json(spec.config), spec.hash(), cubin);
}

}  // namespace tessera
