#include "ops/gemm/cuda_gemm_launch.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace tessera {

namespace {
// The widest vector (elements, at most 16 bytes) that `arg` supports along its contiguous dimension.
int allowed_alignment(const TensorArg& arg, const OperandSignature& operand) {
  const int elem = dtype_bytes(operand.dtype);
  const std::int64_t ld = operand.layout.kind() == LayoutKind::RowMajor ? arg.rs : arg.cs;
  const auto address = reinterpret_cast<std::uintptr_t>(arg.data);
  for (int align = 16 / elem; align > 1; align /= 2)
    if (address % static_cast<std::uintptr_t>(align * elem) == 0 && ld % align == 0 && arg.bs % align == 0)
      return align;
  return 1;
}

void check_alignment(const char* name, const TensorArg& arg, const OperandSignature& operand, int claimed) {
  const int allowed = allowed_alignment(arg, operand);
  if (allowed < claimed)
    throw InvalidArgument(
        name, fmt::format("the kernel reads {}-element vectors, but the pointer, leading dimension or batch stride "
                          "only allows {}",
                          claimed, allowed));
}
}  // namespace

CudaGemmConfig fit_alignment(CudaGemmConfig config, const GemmBinding& binding) {
  const GemmSignature& s = binding.problem.signature;
  const GemmKernelArgs& k = binding.args;
  config.align_a = std::min(config.align_a, allowed_alignment(k.a, s.a));
  config.align_b = std::min(config.align_b, allowed_alignment(k.b, s.b));
  int align_c = allowed_alignment(k.d, s.d);
  if (s.c.layout.reads_memory()) align_c = std::min(align_c, allowed_alignment(k.c, s.c));
  config.align_c = std::min(config.align_c, align_c);
  // TMA stores need D's rows 16-byte aligned.
  if (config.tma_store && config.align_c * dtype_bytes(s.d.dtype) != 16) config.tma_store = false;
  return config;
}

CudaLaunch plan_cuda_launch(const GemmBinding& binding, const CudaGemmSpec& spec) {
  const GemmProblem& p = binding.problem;
  const GemmSignature& s = p.signature;
  const CudaGemmConfig& c = spec.config;
  const GemmKernelArgs& k = binding.args;
  check_alignment("a", k.a, s.a, c.align_a);
  check_alignment("b", k.b, s.b, c.align_b);
  check_alignment("d", k.d, s.d, c.align_c);
  if (s.c.layout.reads_memory()) check_alignment("c", k.c, s.c, c.align_c);
  const std::int64_t limit = (std::int64_t{1} << 31) - 1;
  if (p.m > limit || p.n > limit || p.k > limit) throw InvalidArgument("a/b", "CUDA kernels take M, N, K below 2^31");
  const std::int64_t tiles = ((p.m + c.block_m - 1) / c.block_m) * ((p.n + c.block_n - 1) / c.block_n);
  if (tiles > limit) throw InvalidArgument("d", "too many output tiles for one grid");
  if (p.batch * c.split_k > 65535)
    throw InvalidArgument(
        "d", fmt::format("batch × split_k ({} × {}) exceeds the grid's 65535 z-blocks", p.batch, c.split_k));
  if (binding.inputs.size() > kMaxEpilogueInputs)
    throw InvalidArgument("inputs", fmt::format("CUDA kernels take at most {} epilogue tensors", +kMaxEpilogueInputs));

  CudaLaunch launch;
  GemmParams& params = launch.params;
  params.m = static_cast<int>(p.m);
  params.n = static_cast<int>(p.n);
  params.k = static_cast<int>(p.k);
  params.batch = static_cast<int>(p.batch);
  const auto ref = [](const TensorArg& t) { return TensorRef{t.data, t.rs, t.cs, t.bs}; };
  params.a = ref(k.a);
  params.b = ref(k.b);
  params.c = ref(k.c);
  params.d = ref(k.d);
  for (std::size_t i = 0; i < binding.inputs.size(); ++i) params.inputs[i] = ref(binding.inputs[i]);
  params.alpha = k.alpha;
  params.beta = k.beta;
  // Each split gets a whole number of block_k tiles.
  const std::int64_t k_tiles = (p.k + c.block_k - 1) / c.block_k;
  params.k_per_split = static_cast<int>((k_tiles + c.split_k - 1) / c.split_k * c.block_k);
  params.workspace = nullptr;

  // Clusters: whole clusters of tiles along x (blocks past D's edge load their multicast parts and store nothing).
  const auto padded = [](std::int64_t extent, int tile, int cluster) {
    return (extent + std::int64_t{tile} * cluster - 1) / (std::int64_t{tile} * cluster) * cluster;
  };
  launch.grid_x = static_cast<unsigned>(padded(p.m, c.block_m, c.cluster_m) * padded(p.n, c.block_n, c.cluster_n));
  launch.grid_z = static_cast<unsigned>(p.batch * c.split_k);
  params.sk_blocks = params.sk_k_tiles = 0;
  params.sk_total = params.sk_shared_tiles = 0;
  if (c.stream_k > 0) {
    const StreamKPlan plan = stream_k_plan(p, c, spec.target);
    if (plan.total > limit) throw InvalidArgument("d", "too many (tile, k-tile) iterations for a stream-K grid");
    params.sk_blocks = static_cast<int>(plan.blocks);
    params.sk_k_tiles = static_cast<int>(plan.k_tiles);
    params.sk_total = plan.total;
    params.sk_shared_tiles = plan.shared_tiles;
    launch.grid_x = static_cast<unsigned>(plan.blocks);
    launch.grid_z = plan.blocks > 0 ? 1u : 0u;
    launch.flags_offset = stream_k_flags_offset(p, c, spec.target);
    launch.flags_bytes = plan.shared_tiles * plan.cluster * 4;
  }
  if (c.math == CudaMath::Wgmma) {
    // A (M x K) and B (K x N) as rank-3 tensors, contiguous dimension first, then the other, then the batch; a
    // K-major operand is copied in boxes of block_k x block_m (block_n), an M/N-major one in 64 x block_k slices, all
    // with the 128-byte swizzle the kernel's descriptors read. A K-major tile a cluster shares is loaded in parts, one
    // per sharing block: boxes of its rows / parts.
    const auto operand = [&](const TensorArg& arg, const Layout& layout, std::int64_t rows, bool k_major,
                             int box_rows) {
      TmaTensor t;
      t.global = arg.data;
      t.element_bytes = static_cast<unsigned>(dtype_bytes(s.a.dtype));
      // The stride of the non-contiguous dimension: a row-major view's rs, a column-major one's cs.
      const std::int64_t outer = layout.kind() == LayoutKind::RowMajor ? arg.rs : arg.cs;
      const std::int64_t inner_extent = k_major ? p.k : rows, outer_extent = k_major ? rows : p.k;
      const std::uint64_t row_bytes = static_cast<std::uint64_t>(outer) * t.element_bytes;
      const std::uint64_t batch_bytes =
          p.batch > 1 ? static_cast<std::uint64_t>(arg.bs) * t.element_bytes
                      : row_bytes * static_cast<std::uint64_t>(std::max<std::int64_t>(1, outer_extent));
      t.dims = {static_cast<std::uint64_t>(std::max<std::int64_t>(1, inner_extent)),
                static_cast<std::uint64_t>(std::max<std::int64_t>(1, outer_extent)),
                static_cast<std::uint64_t>(p.batch)};
      t.stride_bytes = {row_bytes, batch_bytes};
      t.box = k_major ? std::vector<unsigned>{static_cast<unsigned>(c.block_k), static_cast<unsigned>(box_rows), 1}
                      : std::vector<unsigned>{64, static_cast<unsigned>(c.block_k), 1};
      t.swizzle_bytes = 128;
      return t;
    };
    launch.tma = {operand(k.a, s.a.layout, p.m, s.a.layout.kind() == LayoutKind::RowMajor, c.block_m / c.cluster_n),
                  operand(k.b, s.b.layout, p.n, s.b.layout.kind() == LayoutKind::ColMajor, c.block_n / c.cluster_m)};
    if (c.tma_store) {
      // D (row-major: N, then M, then the batch) in boxes of 128 bytes of a row x 16 rows, one warp's rows.
      TmaTensor d;
      d.global = k.d.data;
      d.element_bytes = static_cast<unsigned>(dtype_bytes(s.d.dtype));
      const std::uint64_t row_bytes = static_cast<std::uint64_t>(k.d.rs) * d.element_bytes;
      d.dims = {static_cast<std::uint64_t>(std::max<std::int64_t>(1, p.n)),
                static_cast<std::uint64_t>(std::max<std::int64_t>(1, p.m)), static_cast<std::uint64_t>(p.batch)};
      d.stride_bytes = {row_bytes, p.batch > 1
                                       ? static_cast<std::uint64_t>(k.d.bs) * d.element_bytes
                                       : row_bytes * static_cast<std::uint64_t>(std::max<std::int64_t>(1, p.m))};
      d.box = {128 / d.element_bytes, 16, 1};
      d.swizzle_bytes = 128;
      launch.tma.push_back(d);
    }
  }
  launch.block = static_cast<unsigned>(c.threads());
  launch.shared_bytes = static_cast<unsigned>(c.shared_bytes(s));
  launch.workspace_bytes = c.workspace_bytes(p, spec.target);
  if (c.split_k > 1) {
    launch.reduce_block = 256;
    const std::int64_t outputs = p.batch * p.m * p.n;
    launch.reduce_grid = static_cast<unsigned>(std::clamp<std::int64_t>((outputs + 255) / 256, 1, 65535));
  }
  return launch;
}

std::vector<EmuMemoryRange> operand_extents(const GemmBinding& binding) {
  const GemmProblem& p = binding.problem;
  const GemmSignature& s = p.signature;
  std::vector<EmuMemoryRange> extents;
  const auto add = [&](const TensorArg& t, DType dtype, std::int64_t rows, std::int64_t cols) {
    if (!t.data || rows <= 0 || cols <= 0 || p.batch <= 0) return;
    const std::int64_t last = (p.batch - 1) * t.bs + (rows - 1) * t.rs + (cols - 1) * t.cs;
    extents.push_back({t.data, static_cast<std::size_t>((last + 1) * dtype_bytes(dtype))});
  };
  const GemmKernelArgs& k = binding.args;
  add(k.a, s.a.dtype, p.m, p.k);
  add(k.b, s.b.dtype, p.k, p.n);
  if (s.c.layout.reads_memory()) add(k.c, s.c.dtype, p.m, p.n);
  add(k.d, s.d.dtype, p.m, p.n);
  for (std::size_t i = 0; i < binding.inputs.size(); ++i) {
    const IndexForm form = s.inputs[i].form;
    add(binding.inputs[i], s.inputs[i].operand.dtype, form == IndexForm::N ? 1 : p.m, form == IndexForm::M ? 1 : p.n);
  }
  return extents;
}

}  // namespace tessera
