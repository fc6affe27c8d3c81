#include "ops/sparse/sparse_binding.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ops/gemm/gemm_binding.hpp"

namespace tessera {

namespace {

// SpMM tiles K when B exceeds half of the host's L2 (the panel beside D's rows and A's arrays), at most 512 KiB (what
// was measured on 1 MiB L2s; a 2 MiB L2's 1 MiB panels were not tried), its rows are read at least kPanelReuse
// times on average, and then into at most kMaxPanels panels. Zen 3's 512 KiB L2, 8192^2 at 1%, N = 256: panels
// of 512 KiB 87-92 ms (1 thread) and 35 ms (2), of 256 KiB 36-39 and 14.
std::int64_t panel_bytes() {
  static const std::int64_t bytes = std::min<std::int64_t>(512 * 1024, CpuTarget::host().l2_bytes / 2);
  return bytes;
}
constexpr std::int64_t kPanelReuse = 4;
// Rows with many entries per panel take panels of B within the L1 instead (three quarters of the 32 KiB L1 data cache
// of the smallest core here), each task taking its rows through every panel: the B rows of a row's entries then come
// from the L1, not the L2. Zen 4, `tessera spmm --gen G --n N --repeat 15`, alternated with the L2 rule, 1 / 2
// threads: 1024^2 at 30%, N = 64 (28 entries a row per panel) 1.23 -> 0.94 / 0.72 -> 0.54 ms; 2048^2 at 30%, N = 256
// (10 a panel) 16.0 -> 12.0 / 8.3 -> 6.4; 8192x1024 at 20%, N = 64 (19) 6.9 -> 5.4 / 3.9 -> 3.2; 2048^2 at 10%, N = 64
// (9.3) 1.85 -> 1.55 / 1.00 -> 0.89; 512^2 at 50%, N = 64 (43) unchanged; with fewer a panel it loses (one pass per
// panel, as the L2 panels, 1024^2 at 10%, N = 128, 4.7 a panel: 0.88 -> 1.04 ms).
constexpr std::int64_t kL1PanelBytes = 24 * 1024;
constexpr std::int64_t kL1PanelEntries = 8;
constexpr std::int64_t kMaxPanels = 64;
constexpr std::int64_t kEntriesPerPanel = 4;
// SpMM tiles N into column panels of this many bytes of a B row (two register tiles of 16 lanes) when B exceeds
// panel_bytes() and each B row serves at least kColumnPanelReuse entries: every column panel reads A's arrays again
// and B once more (packed), for its B rows to come from the L2 rather than the L3.
constexpr std::int64_t kColumnPanelBytes = 1024;
constexpr std::int64_t kColumnPanelReuse = 64;

// The pattern's plan: the one given (if it describes this pattern) or a new inspection.
std::shared_ptr<const SparsePlan> plan_of(const SparseMatrix& m, const std::shared_ptr<const SparsePlan>& given,
                                          int threads, const char* name, Residence where) {
  if (where == Residence::Device) {
    if (!given)
      fail_argument(std::string(name) + ".plan",
                    "is required for arrays in device memory: inspect the host arrays with SparsePlan::inspect");
    m.signature().check();
    if (!given->matches_shape(m))
      fail_argument(std::string(name) + ".plan", "was made for a pattern of another shape, signature or entry count");
    if (m.row_offsets == nullptr || (m.entries > 0 && (m.col_indices == nullptr || m.values == nullptr)))
      fail_argument(name, "has a null array");
    return given;
  }
  if (given) {
    if (!given->describes(m))
      fail_argument(std::string(name) + ".plan", "was made for another pattern (the arrays or their contents changed)");
    return given;
  }
  return std::make_shared<const SparsePlan>(SparsePlan::inspect(m, threads, name));
}

// The byte ranges of a pattern's arrays, which an output must not overlap.
std::vector<ReadRange> pattern_ranges(const SparseMatrix& m, const std::string& name) {
  const std::int64_t index = m.index_bits / 8;
  std::vector<ReadRange> ranges{{m.row_offsets, (m.block_row_count() + 1) * index, name + ".row_offsets"},
                                {m.col_indices, m.entries * index, name + ".col_indices"}};
  if (m.values)
    ranges.push_back({m.values, m.entries * m.block_rows * m.block_cols * dtype_bytes(m.value), name + ".values"});
  return ranges;
}

double element(const MatrixOperand& t, std::int64_t r, std::int64_t c) {
  const std::int64_t at = r * t.arg.rs + c * t.arg.cs;
  if (t.dtype == DType::f32) return static_cast<const float*>(t.arg.data)[at];
  const std::uint16_t h = static_cast<const std::uint16_t*>(t.arg.data)[at];
  return t.dtype == DType::bf16 ? from_bf16(h) : from_f16(h);
}

// A matrix operand as row-major f32 in `copy`, unless it already is (or is bf16 row-major and `bf16_ok`). In device
// memory nothing is copied: it must be row-major already (any of f32, f16, bf16).
TensorArg row_major(const MatrixOperand& t, std::vector<float>& copy, bool bf16_ok, const std::string& name,
                    Residence where = Residence::Host) {
  if (where == Residence::Device) {
    if (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16)
      fail_argument(name, fmt::format("must be f32, f16 or bf16, got {}", dtype_name(t.dtype)));
    if (t.arg.cs != 1 && t.cols > 1) fail_argument(name, "must have unit stride along its rows on CUDA (row-major)");
    TensorArg a = t.arg;
    a.cs = 1;
    if (t.rows <= 1) a.rs = t.cols;
    return a;
  }
  if (t.dtype != DType::f32 && t.dtype != DType::bf16 && t.dtype != DType::f16)
    fail_argument(name, fmt::format("must be f32 or bf16, got {}", dtype_name(t.dtype)));
  const bool unit_columns = t.arg.cs == 1 || t.cols <= 1;
  if (unit_columns && (t.dtype == DType::f32 || (bf16_ok && t.dtype == DType::bf16))) {
    TensorArg a = t.arg;
    a.cs = 1;
    if (t.rows <= 1) a.rs = t.cols;
    return a;
  }
  copy.resize(static_cast<std::size_t>(t.rows * t.cols));
  for (std::int64_t r = 0; r < t.rows; ++r)
    for (std::int64_t c = 0; c < t.cols; ++c)
      copy[static_cast<std::size_t>(r * t.cols + c)] = static_cast<float>(element(t, r, c));
  return {copy.data(), t.cols, 1, 0};
}

bool overlaps(const void* x, std::int64_t x_bytes, const void* y, std::int64_t y_bytes) {
  if (x_bytes <= 0 || y_bytes <= 0) return false;
  const char *a = static_cast<const char*>(x), *b = static_cast<const char*>(y);
  return a < b + y_bytes && b < a + x_bytes;
}

}  // namespace

SpmmBinding bind_spmm(const SpmmArgs& g, int threads, Residence where) {
  SpmmBinding bound;
  SpmmProblem& p = bound.problem;
  p.threads = g.threads;
  const bool host = where == Residence::Host;
  if (host && g.a.value == DType::f16)
    fail_argument("a.values", "are f16; the CPU takes f32 or bf16 (f16 runs on CUDA targets)");
  if (g.a.entries > 0 && g.a.values == nullptr) fail_argument("a.values", "is null");
  bound.plan = plan_of(g.a, g.plan, g.threads ? g.threads : threads, "a", where);
  p.m = g.a.rows;
  p.k = g.a.cols;
  p.pattern = bound.plan->stats();
  if (g.b.empty()) fail_argument("b", "is required");
  const MatrixOperand b = bind_matrix(g.b, "b");
  if (b.rows != p.k) fail_argument("b", fmt::format("has {} rows, but a has K = {} columns", b.rows, p.k));
  p.n = b.cols;

  std::vector<ReadRange> reads = pattern_ranges(g.a, "a");
  reads.push_back({b.arg.data, b.bytes, "b"});
  OutputBinding out = bind_output(g.c, g.d, g.inputs, g.epilogue, g.beta, p.m, p.n, reads);
  if (out.signature.d.dtype != DType::f32) fail_argument("d", "must be f32");
  if (out.signature.c.layout.reads_memory() && out.signature.c.dtype != DType::f32) fail_argument("c", "must be f32");
  for (const EpilogueInput& in : out.signature.inputs)
    if (in.operand.dtype != DType::f32) fail_argument("inputs." + in.name, "must be f32");

  SpmmKernelArgs& k = bound.args;
  k.b = row_major(b, bound.b_copy, true, "b", where);
  const DType b_dtype = bound.b_copy.empty() ? b.dtype : DType::f32;
  GemmSignature& dense = p.signature.dense;
  dense = out.signature;
  dense.a = {g.a.value == DType::bf16 ? DType::bf16 : DType::f32, Layout::row_major()};
  dense.b = {b_dtype, Layout::row_major()};
  dense.accumulator = DType::f32;
  p.signature.a = g.a.signature();
  p.signature.check();

  k.m = p.m;
  k.n = p.n;
  k.k = p.k;
  k.entries = g.a.entries;
  k.row_offsets = g.a.row_offsets;
  k.col_indices = g.a.col_indices;
  k.values = g.a.values;
  k.c = out.c;
  k.d = out.d;
  k.alpha = g.alpha;
  k.beta = g.beta;
  k.n_begin = 0;
  k.n_end = p.n;
  bound.inputs = std::move(out.inputs);

  // K tiled when B is larger than the L2 budget and its rows are reused enough: the panels' partial sums go
  // through D, so D must be row-major and no operand the epilogue reads may share its memory. Blocks of 4 rows or
  // more keep the FMA units busy on what they load, and the panels' extra passes over D only cost them
  // (16x16 blocks, N = 256, 1 thread, Zen 4: 8.4 ms whole, 9.3 ms in panels).
  const std::int64_t b_bytes = b_dtype == DType::bf16 ? 2 : 4;
  const std::int64_t block_cols = g.a.block_col_count();
  // N tiled where B's rows are wider than a column panel, B exceeds the L2 budget and its rows are reused enough.
  // Measured on Zen 4, 1 thread, N = 1024: 1024^2 at 10% (102 entries a B row) 7.4 ms whole, 4.7 in panels of 256
  // columns, 6.1 of 128; 4096^2 at 5% (205) 96 ms, 53; at 0.5% (20) 10.5, 13.2 (slower).
  if (host && g.a.block_rows < 4 && p.n * b_bytes > kColumnPanelBytes && p.k * p.n * b_bytes > panel_bytes() &&
      g.a.entries >= kColumnPanelReuse * block_cols)
    bound.column_panel = kColumnPanelBytes / b_bytes;
  const std::int64_t panel_columns = bound.column_panel > 0 ? std::min(bound.column_panel, p.n) : p.n;
  const std::int64_t b_row_bytes = panel_columns * b_bytes * g.a.block_cols;  // per block column
  bool d_alone = dense.d.layout.kind() == LayoutKind::RowMajor;
  if (dense.c.layout.reads_memory() && k.c.data == k.d.data) d_alone = false;
  for (const TensorArg& in : bound.inputs) d_alone = d_alone && in.data != k.d.data;
  // Every panel passes over all of D (its partial sums loaded and stored): worth it only where the rows hold
  // several entries per panel. Measured on Zen 4: 4096^2 at 5%, N = 256 (205 entries a row, 8 panels) gains 1.3x;
  // at 0.5% (20 a row, 8 panels) loses 1.4x; R-MAT 10^5 rows (9.5 a row, 49 panels) loses 4.8x.
  const std::int64_t rows = std::max<std::int64_t>(1, g.a.block_row_count());
  const auto panel_width = [&](std::int64_t budget) {
    const std::int64_t width = std::max<std::int64_t>(1, budget / std::max<std::int64_t>(1, b_row_bytes));
    return std::max(width, (block_cols + kMaxPanels - 1) / kMaxPanels);
  };
  const auto enough_entries = [&](std::int64_t width, std::int64_t per_panel) {
    const std::int64_t panels = (block_cols + width - 1) / width;
    return width < block_cols && g.a.entries >= per_panel * panels * rows;
  };
  if (host && d_alone && g.a.block_rows < 4 && b_row_bytes > 0) {
    const std::int64_t l1_width = panel_width(kL1PanelBytes), l2_width = panel_width(panel_bytes());
    if (enough_entries(l1_width, kL1PanelEntries)) {
      bound.panels = bound.plan->column_panels(g.a, l1_width);
      bound.panels_per_task = true;
    } else if (block_cols * b_row_bytes > panel_bytes() && g.a.entries >= kPanelReuse * block_cols &&
               enough_entries(l2_width, kEntriesPerPanel))
      bound.panels = bound.plan->column_panels(g.a, l2_width);
  }
  return bound;
}

SddmmBinding bind_sddmm(const SddmmArgs& g, int threads, Residence where) {
  SddmmBinding bound;
  SddmmProblem& p = bound.problem;
  p.threads = g.threads;
  const bool host = where == Residence::Host;
  if (g.pattern.format != SparseFormat::Csr) fail_argument("pattern", "must be CSR (SDDMM samples at single entries)");
  if (host && g.pattern.value == DType::f16) fail_argument("pattern.values", "are f16; the CPU takes f32 or bf16");
  if (!g.epilogue.sampled())
    fail_argument("epilogue", "must be in the sampled dialect (SddmmArgs::set_epilogue or Epilogue::parse_sampled)");
  bound.plan = plan_of(g.pattern, g.plan, g.threads ? g.threads : threads, "pattern", where);
  p.m = g.pattern.rows;
  p.n = g.pattern.cols;
  p.pattern = bound.plan->stats();
  if (g.a.empty()) fail_argument("a", "is required");
  if (g.b.empty()) fail_argument("b", "is required");
  if (g.out.empty()) fail_argument("out", "is required");
  const MatrixOperand a = bind_matrix(g.a, "a");
  const MatrixOperand b = bind_matrix(g.b, "b");
  if (a.rows != p.m) fail_argument("a", fmt::format("has {} rows, the pattern has M = {}", a.rows, p.m));
  if (b.rows != p.n) fail_argument("b", fmt::format("has {} rows, the pattern has N = {} columns", b.rows, p.n));
  if (a.cols != b.cols) fail_argument("b", fmt::format("has K = {} columns, a has {}", b.cols, a.cols));
  p.k = a.cols;
  if (g.epilogue.reads_s() && g.pattern.entries > 0 && g.pattern.values == nullptr)
    fail_argument("pattern.values", "the epilogue reads s, but the pattern has no values");

  // out: one f32 per entry, contiguous.
  const Tensor& o = g.out;
  if (o.rank() != 1) fail_argument("out", fmt::format("must be 1-D [entries], got {}-D", o.rank()));
  if (o.strides.size() != 1) fail_argument("out", "has 1 dimension but a different number of strides");
  if (o.dtype != DType::f32) fail_argument("out", fmt::format("must be f32, got {}", dtype_name(o.dtype)));
  if (o.shape[0] != g.pattern.entries)
    fail_argument("out", fmt::format("has {} elements, the pattern has {} entries", o.shape[0], g.pattern.entries));
  if (o.shape[0] > 1 && o.strides[0] != 1)
    fail_argument("out", fmt::format("must be contiguous, got stride {}", o.strides[0]));
  if (o.shape[0] > 0 && o.data == nullptr) fail_argument("out", "data is null");
  const std::int64_t out_bytes = o.shape[0] * 4;

  GemmSignature& dense = p.signature.dense;
  dense.epilogue = g.epilogue;
  for (const auto& [name, tensor] : g.inputs) {
    const auto& wanted = g.epilogue.tensors();
    if (std::none_of(wanted.begin(), wanted.end(), [&](const auto& t) { return t.name == name; }))
      fail_argument("inputs." + name, "is not read by the epilogue '" + g.epilogue.text() + "'");
  }
  std::vector<std::pair<const void*, std::int64_t>> reads{{a.arg.data, a.bytes}, {b.arg.data, b.bytes}};
  for (const auto& t : g.epilogue.tensors()) {
    const std::string name = "inputs." + t.name;
    auto it = g.inputs.find(t.name);
    if (it == g.inputs.end()) fail_argument(name, "the epilogue reads " + t.name + " but no tensor was bound to it");
    const MatrixOperand v = bind_vector(it->second, name, t.form, t.form == IndexForm::N ? p.n : p.m);
    if (v.dtype != DType::f32) fail_argument(name, "must be f32");
    bound.inputs.push_back(v.arg);
    dense.inputs.push_back({t.name, t.form, {v.dtype, v.layout}});
    reads.emplace_back(v.arg.data, v.bytes);
  }
  for (const ReadRange& r : pattern_ranges(g.pattern, "pattern"))
    if (overlaps(o.data, out_bytes, r.data, r.bytes)) fail_argument("out", "overlaps " + r.name);
  for (const auto& [data, bytes] : reads)
    if (overlaps(o.data, out_bytes, data, bytes)) fail_argument("out", "overlaps an input");

  SddmmKernelArgs& k = bound.args;
  k.a = row_major(a, bound.a_copy, false, "a", where);
  k.b = row_major(b, bound.b_copy, false, "b", where);
  // In device memory the types stay (the CUDA kernels convert as they load); on the host they are f32 now.
  dense.a = {host ? DType::f32 : a.dtype, Layout::row_major()};
  dense.b = {host ? DType::f32 : b.dtype, Layout::col_major()};  // Bᵀ as GEMM's K×N operand
  dense.c = {DType::f32, Layout::zero()};
  dense.d = {DType::f32, Layout::row_major()};
  p.signature.pattern = g.pattern.signature();
  p.signature.check();

  k.m = p.m;
  k.n = p.n;
  k.k = p.k;
  k.entries = g.pattern.entries;
  k.row_offsets = g.pattern.row_offsets;
  k.col_indices = g.pattern.col_indices;
  k.values = g.epilogue.reads_s() ? g.pattern.values : nullptr;
  k.out = o.data;
  k.alpha = g.alpha;
  return bound;
}

}  // namespace tessera
