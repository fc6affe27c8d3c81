// SpMM and SDDMM in a kernel library's C header and driver: the sparse matrix and args types, the kernels' calling
// conventions (SpmmKernelArgs, SddmmKernelArgs), the pattern's checks, its rows split into tasks of equal work as
// tessera's inspector splits them, and SpMM's column panels of a packed B where the runtime uses them.
#include <fmt/format.h>

#include "ops/library/library_c_parts.hpp"

namespace tessera {

namespace {

std::string sparse_comment(const SparseSignature& s) {
  const std::string storage =
      s.format == SparseFormat::Csr
          ? std::string("CSR")
          : fmt::format("BSR with {}x{} blocks (rows and cols need not be multiples)", s.block_rows, s.block_cols);
  return fmt::format("{}, int{}_t row_offsets and col_indices, {} values", storage, s.index_bits, dtype_name(s.value));
}

// Checks of the pattern's sizes and structure (one pass over its offsets and indices) as C statements.
std::string pattern_checks(const std::string& fn, const char* name, const SparseSignature& s, bool values_needed) {
  return fmt::format(
      "  {{\n"
      "    const int status = check_pattern(\"{0}\", \"{1}\", &x->{1}, {2}, {3}, {4}, {5});\n"
      "    if (status) return status;\n"
      "  }}\n",
      fn, name, s.index_bits, s.block_rows, s.block_cols, values_needed ? 1 : 0);
}

}  // namespace

std::string sparse_header_types(const std::string& lib) {
  return fmt::format(
      R"C(/* A sparse matrix, CSR (1×1 blocks) or BSR as each function says: row_offsets holds one index per block row
 * plus one (from 0, never decreasing, ending at entries), col_indices one block column per stored entry, values
 * block_rows·block_cols values per entry (row-major within a block). The structure is checked on every call. */
typedef struct {0}_sparse {{
  int64_t rows, cols; /* elements */
  int64_t entries;    /* stored entries: non-zeros (CSR) or blocks (BSR) */
  const void* row_offsets;
  const void* col_indices;
  const void* values;
}} {0}_sparse;

/* SpMM: D = epilogue(A·B, ...) with A sparse M×K (M = a.rows, K = a.cols), B dense K×N row-major (cs = 1),
 * C and D M×N f32 (bs ignored). */
typedef struct {0}_spmm_args {{
  {0}_sparse a;
  int64_t n;
  {0}_tensor b, c, d;
  const {0}_tensor* inputs; /* the epilogue's tensors, in the order each function lists */
  float alpha, beta;
  int threads; /* 0: the library's setting */
}} {0}_spmm_args;

/* SDDMM: out[p] = epilogue(dot(A[i,:], B[j,:])) for the p-th stored (i, j) of the pattern (M×N, CSR), in the
 * pattern's order; A M×K and B N×K f32 row-major (cs = 1). */
typedef struct {0}_sddmm_args {{
  {0}_sparse pattern; /* values (s) read only when the epilogue names s */
  int64_t k;
  {0}_tensor a, b;
  float* out; /* pattern.entries values */
  const {0}_tensor* inputs;
  float alpha;
  int threads;
}} {0}_sddmm_args;

)C",
      lib);
}

std::string sparse_header_kernel(const std::string& lib, const ResolvedKernel& r) {
  const std::string fn = lib + "_" + r.kernel.name;
  const bool spmm = r.kernel.op == "spmm";
  std::string h = fmt::format("/* {}:\n", fn);
  if (spmm) {
    const SpmmSignature& s = std::get<SpmmSignature>(r.kernel.signature);
    h += fmt::format(" * D = {}\n * A: {}; B: {} K×N row-major; D: f32 M×N {}", s.dense.epilogue.text(),
                     sparse_comment(s.a), dtype_name(s.dense.b.dtype), layout_word(s.dense.d.layout));
    if (s.dense.c.layout.reads_memory())
      h += fmt::format("; C: f32 M×N {} (read: the epilogue names c)", layout_word(s.dense.c.layout));
    h += fmt::format("\n{}", inputs_comment(s.dense.inputs));
  } else {
    const SddmmSignature& s = std::get<SddmmSignature>(r.kernel.signature);
    h += fmt::format(" * out[p] = {}\n * pattern: {}\n{}", s.dense.epilogue.text(), sparse_comment(s.pattern),
                     inputs_comment(s.dense.inputs));
  }
  h += fmt::format(" *\n * Variants (the call picks by the CPU's ISA{}):\n", spmm ? " and N" : "");
  for (std::size_t i = 0; i < r.variants.size(); ++i)
    h += fmt::format(" *   {}: {} chosen for {}x{}x{}\n", i, r.variants[i].symbol(), r.variants[i].chosen_for.m,
                     r.variants[i].chosen_for.n, r.variants[i].chosen_for.k);
  h += fmt::format(
      " */\n"
      "int {0}(const {1}_{2}_args* args);\n"
      "/* The variant {0} runs for a shape on this CPU (-1: none), and each variant by index. */\n"
      "int {0}_variant_for(int64_t m, int64_t n, int64_t k);\n"
      "int {0}_variant_count(void);\n"
      "const char* {0}_variant_name(int variant);\n"
      "int {0}_run_variant(int variant, const {1}_{2}_args* args);\n\n",
      fn, lib, r.kernel.op);
  return h;
}

std::string sparse_driver_common(const std::string& lib, bool spmm, bool sddmm) {
  std::string c = fmt::format(R"C(static int64_t index_at(const void* a, int bits, int64_t i) {{
  return bits == 32 ? (int64_t)((const int32_t*)a)[i] : ((const int64_t*)a)[i];
}}

/* A pattern's sizes and structure: what tessera's inspector checks, except that the indices of a row need not be
 * sorted (the kernels do not rely on it). */
static int check_pattern(const char* fn, const char* name, const {0}_sparse* s, int bits, int64_t block_rows,
                         int64_t block_cols, int values_needed) {{
  if (s->rows < 0 || s->cols < 0 || s->entries < 0)
    return failf("%s: %s: rows, cols and entries must be >= 0", fn, name);
  if (s->rows > ((int64_t)1 << 40) || s->cols > ((int64_t)1 << 40))
    return failf("%s: %s: rows and cols must be at most 2^40", fn, name);
  const int64_t brows = (s->rows + block_rows - 1) / block_rows, bcols = (s->cols + block_cols - 1) / block_cols;
  if (bits == 32 && (s->entries > 2147483647LL || bcols > 2147483647LL))
    return failf("%s: %s: too large for 32-bit indices", fn, name);
  if (!s->row_offsets) return failf("%s: %s.row_offsets is null", fn, name);
  if (s->entries > 0 && !s->col_indices) return failf("%s: %s.col_indices is null", fn, name);
  if (s->entries > 0 && values_needed && !s->values) return failf("%s: %s.values is null", fn, name);
  if (index_at(s->row_offsets, bits, 0) != 0)
    return failf("%s: %s.row_offsets[0] is %lld, must be 0", fn, name, (long long)index_at(s->row_offsets, bits, 0));
  int64_t previous = 0;
  for (int64_t r = 1; r <= brows; ++r) {{
    const int64_t end = index_at(s->row_offsets, bits, r);
    if (end < previous || end > s->entries)
      return failf("%s: %s.row_offsets[%lld] = %lld: offsets must not decrease nor exceed the %lld entries", fn, name,
                   (long long)r, (long long)end, (long long)s->entries);
    previous = end;
  }}
  if (previous != s->entries)
    return failf("%s: %s.entries is %lld, but the row offsets end at %lld", fn, name, (long long)s->entries,
                 (long long)previous);
  for (int64_t p = 0; p < s->entries; ++p) {{
    const int64_t col = index_at(s->col_indices, bits, p);
    if (col < 0 || col >= bcols)
      return failf("%s: %s.col_indices[%lld] = %lld is outside 0..%lld", fn, name, (long long)p, (long long)col,
                   (long long)bcols - 1);
  }}
  return {1}_OK;
}}

/* A pattern's block rows split into `tasks` ranges of about equal work (its entries plus ROW_COST a row), as
 * tessera's inspector splits them: range t starts at the first row whose preceding work reaches t/tasks of all. */
#define ROW_COST 2
#define TASKS_PER_THREAD 8
static int64_t split_row(const void* offsets, int bits, int64_t rows, int64_t tasks, int64_t t) {{
  if (t <= 0) return 0;
  if (t >= tasks) return rows;
  const double total = (double)(index_at(offsets, bits, rows) + ROW_COST * rows);
  const double boundary = total * (double)t / (double)tasks;
  int64_t lo = 0, hi = rows;
  while (lo < hi) {{
    const int64_t mid = lo + (hi - lo) / 2;
    if ((double)(index_at(offsets, bits, mid) + ROW_COST * mid) >= boundary)
      hi = mid;
    else
      lo = mid + 1;
  }}
  return lo;
}}
static int64_t row_tasks(int64_t rows, int threads) {{
  const int64_t most = (int64_t)TASKS_PER_THREAD * threads;
  return threads <= 1 || rows < 1 ? 1 : most < rows ? most : rows;
}}

/* SpMM kernels' calling convention (tessera's SpmmKernelArgs). */
typedef struct {{
  int64_t m, n, k, entries;
  const void* row_offsets;
  const void* col_indices;
  const void* values;
  {0}_tensor b, c, d;
  const {0}_tensor* inputs;
  float alpha, beta;
  int32_t accumulate, finish;
  int64_t n_begin, n_end;
}} spmm_kernel_args;
typedef void (*spmm_kernel_fn)(const spmm_kernel_args*, int64_t row_begin, int64_t row_end);
/* SDDMM kernels' calling convention (tessera's SddmmKernelArgs). */
typedef struct {{
  int64_t m, n, k, entries;
  const void* row_offsets;
  const void* col_indices;
  const void* values;
  {0}_tensor a, b;
  void* out;
  const {0}_tensor* inputs;
  float alpha;
  int32_t accumulate, finish;
}} sddmm_kernel_args;
typedef void (*sddmm_kernel_fn)(const sddmm_kernel_args*, int64_t row_begin, int64_t row_end);
/* The kernels' row ranges: tasks of equal work, each run by the op's kernel. */
typedef struct {{
  spmm_kernel_fn spmm; /* one of the two */
  sddmm_kernel_fn sddmm;
  const void* args;
  const void* row_offsets;
  int bits;
  int64_t rows, tasks;
}} row_job;
static void run_rows(const void* context, void* ws, int64_t begin, int64_t end) {{
  const row_job* job = (const row_job*)context;
  (void)ws;
  for (int64_t t = begin; t < end; ++t) {{
    const int64_t first = split_row(job->row_offsets, job->bits, job->rows, job->tasks, t);
    const int64_t last = split_row(job->row_offsets, job->bits, job->rows, job->tasks, t + 1);
    if (last <= first) continue;
    if (job->spmm)
      job->spmm((const spmm_kernel_args*)job->args, first, last);
    else
      job->sddmm((const sddmm_kernel_args*)job->args, first, last);
  }}
}}
/* A row-major matrix's columns [n0, n0 + width) copied into rows of `width` elements, 256 rows a task. */
typedef struct {{
  const char* source;
  char* packed;
  int64_t rows, rs, n0, width, element;
}} pack_job;
static void pack_rows(const void* context, void* ws, int64_t begin, int64_t end) {{
  const pack_job* job = (const pack_job*)context;
  (void)ws;
  for (int64_t r = begin * 256; r < end * 256 && r < job->rows; ++r)
    memcpy(job->packed + r * job->width * job->element, job->source + (r * job->rs + job->n0) * job->element,
           (size_t)(job->width * job->element));
}}

)C",
                              lib, c_upper(lib));
  if (spmm)
    c += fmt::format(R"C(typedef struct {{
  spmm_kernel_fn fn;
  const char* symbol;
  int isa;
  int64_t hint_n, tile_n; /* the N its config was chosen for; columns per register tile */
}} spmm_variant;

static const spmm_variant* spmm_pick(const spmm_variant* vs, int count, int64_t n) {{
  const spmm_variant* best = NULL;
  double best_distance = 0;
  for (int i = 0; i < count; ++i) {{
    const spmm_variant* v = &vs[i];
    if (!runs_here(v->isa, 0)) continue;
    /* The widest ISA first, then the variant chosen for the nearest N. */
    const double r = (double)(n > 0 ? n : 1) / (double)v->hint_n, distance = r > 1 ? r : 1 / r;
    if (!best || v->isa > best->isa || (v->isa == best->isa && distance < best_distance)) {{
      best = v;
      best_distance = distance;
    }}
  }}
  return best;
}}

/* Runs a checked call. Where B outgrows half an L2 and each B row serves at least 64 entries, N is computed in
 * column panels of 1 KiB of a B row, each panel of B packed into contiguous rows first (as tessera's runtime does;
 * it also tiles K where B is larger still, which this driver does not). */
static int spmm_run(const spmm_variant* v, const {0}_spmm_args* x, int bits, int block_rows, int block_cols,
                    int b_bytes, int reads_c) {{
  if (!runs_here(v->isa, 0)) {{
    snprintf(last_error, sizeof last_error, "%s: this CPU lacks the ISA of variant %s", "{0}", v->symbol);
    return {1}_ENOCPU;
  }}
  spmm_kernel_args a;
  memset(&a, 0, sizeof a);
  a.m = x->a.rows, a.n = x->n, a.k = x->a.cols, a.entries = x->a.entries;
  a.row_offsets = x->a.row_offsets, a.col_indices = x->a.col_indices, a.values = x->a.values;
  a.b = x->b, a.d = x->d;
  if (reads_c) a.c = x->c;
  a.inputs = x->inputs;
  a.alpha = x->alpha, a.beta = x->beta;
  a.accumulate = 0, a.finish = 1;
  if (a.b.rs < a.n || a.k <= 1) a.b.rs = a.n;
  const int threads = call_threads(x->threads);
  const int64_t rows = (a.m + block_rows - 1) / block_rows, bcols = (a.k + block_cols - 1) / block_cols;
  const row_job job = {{v->fn, NULL, &a, a.row_offsets, bits, rows, row_tasks(rows, threads)}};
  const int participants = job.tasks < threads ? (int)job.tasks : threads;
  last_error[0] = 0;
  int64_t width = a.n;
  if (block_rows < 4 && a.n * b_bytes > 1024 && a.k * a.n * b_bytes > 512 * 1024 && a.entries >= 64 * bcols)
    width = (1024 / b_bytes + v->tile_n - 1) / v->tile_n * v->tile_n;
  if (width >= a.n) {{
    a.n_begin = 0, a.n_end = a.n;
    return run_job(v->symbol, run_rows, &job, rows > 0 ? job.tasks : 0, participants);
  }}
  char* packed = (char*)malloc((size_t)(a.k * width * b_bytes));
  if (!packed) {{
    snprintf(last_error, sizeof last_error, "%s: no memory for a %lld-byte panel of B", v->symbol,
             (long long)(a.k * width * b_bytes));
    return {1}_ENOMEM;
  }}
  int status = {1}_OK;
  for (int64_t n0 = 0; n0 < a.n && status == {1}_OK; n0 += width) {{
    a.n_begin = n0;
    a.n_end = n0 + width < a.n ? n0 + width : a.n;
    const pack_job pack = {{(const char*)x->b.data, packed, a.k, x->b.rs, n0, a.n_end - n0, b_bytes}};
    status = run_job(v->symbol, pack_rows, &pack, (a.k + 255) / 256, threads);
    /* The kernel addresses column n0 of the panel's rows: B aimed so that it lands on the copy's first element. */
    a.b.data = (const void*)((uintptr_t)packed - (uintptr_t)(n0 * b_bytes));
    a.b.rs = a.n_end - n0;
    if (status == {1}_OK) status = run_job(v->symbol, run_rows, &job, rows > 0 ? job.tasks : 0, participants);
  }}
  free(packed);
  return status;
}}

)C",
                     lib, c_upper(lib));
  if (sddmm)
    c += fmt::format(R"C(typedef struct {{
  sddmm_kernel_fn fn;
  const char* symbol;
  int isa;
  int64_t k_panel; /* K elements a pass (0: K whole) */
}} sddmm_variant;
static const sddmm_variant* sddmm_pick(const sddmm_variant* vs, int count) {{
  const sddmm_variant* best = NULL;
  for (int i = 0; i < count; ++i)
    if (runs_here(vs[i].isa, 0) && (!best || vs[i].isa > best->isa)) best = &vs[i];
  return best;
}}

static int sddmm_run(const sddmm_variant* v, const {0}_sddmm_args* x, int bits, int reads_s) {{
  if (!runs_here(v->isa, 0)) {{
    snprintf(last_error, sizeof last_error, "%s: this CPU lacks the ISA of variant %s", "{0}", v->symbol);
    return {1}_ENOCPU;
  }}
  sddmm_kernel_args a;
  memset(&a, 0, sizeof a);
  a.m = x->pattern.rows, a.n = x->pattern.cols, a.k = x->k, a.entries = x->pattern.entries;
  a.row_offsets = x->pattern.row_offsets, a.col_indices = x->pattern.col_indices;
  a.values = reads_s ? x->pattern.values : NULL;
  a.a = x->a, a.b = x->b;
  if (a.a.rs < a.k || a.m <= 1) a.a.rs = a.k;
  if (a.b.rs < a.k || a.n <= 1) a.b.rs = a.k;
  a.out = x->out;
  a.inputs = x->inputs;
  a.alpha = x->alpha;
  a.accumulate = 0, a.finish = 1;
  const int threads = call_threads(x->threads);
  const row_job job = {{NULL, v->fn, &a, a.row_offsets, bits, a.m, row_tasks(a.m, threads)}};
  const int participants = job.tasks < threads ? (int)job.tasks : threads;
  last_error[0] = 0;
  if (v->k_panel <= 0 || a.k <= v->k_panel || a.m == 0 || a.n == 0)
    return run_job(v->symbol, run_rows, &job, a.m > 0 ? job.tasks : 0, participants);
  /* K in panels, as tessera's runtime runs this config: each pass's slice of B packed into rows of its own, A's read
   * in place, the partial sums kept in out between passes. */
  const int64_t k = a.k;
  const float* a_data = (const float*)x->a.data;
  const int64_t b_rs = a.b.rs;
  char* packed = (char*)malloc((size_t)(a.n * v->k_panel * 4));
  if (!packed) {{
    snprintf(last_error, sizeof last_error, "%s: no memory for a %lld-byte panel of B", v->symbol,
             (long long)(a.n * v->k_panel * 4));
    return {1}_ENOMEM;
  }}
  int status = {1}_OK;
  for (int64_t k0 = 0; k0 < k && status == {1}_OK; k0 += v->k_panel) {{
    a.k = k - k0 < v->k_panel ? k - k0 : v->k_panel;
    a.a.data = a_data + k0;
    const pack_job pack = {{(const char*)x->b.data, packed, a.n, b_rs, k0, a.k, 4}};
    status = run_job(v->symbol, pack_rows, &pack, (a.n + 255) / 256, threads);
    a.b.data = packed, a.b.rs = a.k;
    a.accumulate = k0 > 0, a.finish = k0 + v->k_panel >= k;
    if (status == {1}_OK) status = run_job(v->symbol, run_rows, &job, a.m > 0 ? job.tasks : 0, participants);
  }}
  free(packed);
  return status;
}}

)C",
                     lib, c_upper(lib));
  return c;
}

std::string sparse_driver_kernel(const std::string& lib, const ResolvedKernel& r) {
  const std::string fn = lib + "_" + r.kernel.name;
  const std::string& op = r.kernel.op;
  std::string c;
  for (const auto& v : r.variants)
    c += fmt::format("void {}(const {}_kernel_args*, int64_t, int64_t);\n", v.symbol(), op);
  c += fmt::format("static const {}_variant {}_variants[] = {{\n", op, fn);
  for (const auto& v : r.variants) {
    const char* isa = v.target().isa == CpuIsa::Avx512 ? "ISA_AVX512" : "ISA_AVX2";
    if (const auto* spmm = std::get_if<CpuSpmmSpec>(&v.spec))
      c += fmt::format("    {{{0}, \"{0}\", {1}, {2}, {3}}},\n", v.symbol(), isa,
                       std::max<std::int64_t>(1, v.chosen_for.n),
                       std::int64_t{spmm->config.nv} * spmm->target.vector_lanes());
    else
      c += fmt::format("    {{{0}, \"{0}\", {1}, {2}}},\n", v.symbol(), isa,
                       std::get<CpuSddmmSpec>(v.spec).config.k_panel);
  }
  c += "};\n\n";
  std::string checks = fmt::format(
      "  if (!x) return fail(\"{0}: args is null\");\n"
      "  if (x->threads < 0) return fail(\"{0}: threads must be >= 0\");\n",
      fn);
  std::string run;
  if (op == "spmm") {
    const SpmmSignature& s = std::get<SpmmSignature>(r.kernel.signature);
    checks +=
        fmt::format("  if (x->n < 0 || x->n > ((int64_t)1 << 40)) return fail(\"{0}: n must be in 0..2^40\");\n", fn);
    checks += pattern_checks(fn, "a", s.a, true);
    checks += operand_checks(fn, "b", Layout::row_major(), "x->a.cols", "x->n", true);
    checks += operand_checks(fn, "d", s.dense.d.layout, "x->a.rows", "x->n", true);
    if (s.dense.c.layout.reads_memory()) checks += operand_checks(fn, "c", s.dense.c.layout, "x->a.rows", "x->n", true);
    checks += input_checks(fn, s.dense.inputs, "x->a.rows", "x->n");
    run = fmt::format("spmm_run(v, x, {}, {}, {}, {}, {})", s.a.index_bits, s.a.block_rows, s.a.block_cols,
                      dtype_bytes(s.dense.b.dtype), s.dense.c.layout.reads_memory() ? 1 : 0);
  } else {
    const SddmmSignature& s = std::get<SddmmSignature>(r.kernel.signature);
    const bool reads_s = s.dense.epilogue.reads_s();
    checks +=
        fmt::format("  if (x->k < 0 || x->k > ((int64_t)1 << 40)) return fail(\"{0}: k must be in 0..2^40\");\n", fn);
    checks += pattern_checks(fn, "pattern", s.pattern, reads_s);
    checks += operand_checks(fn, "a", Layout::row_major(), "x->pattern.rows", "x->k", true);
    checks += operand_checks(fn, "b", Layout::row_major(), "x->pattern.cols", "x->k", true);
    checks += fmt::format("  if (!x->out && x->pattern.entries > 0) return fail(\"{}: out is null\");\n", fn);
    checks += input_checks(fn, s.dense.inputs, "x->pattern.rows", "x->pattern.cols");
    run = fmt::format("sddmm_run(v, x, {}, {})", s.pattern.index_bits, reads_s ? 1 : 0);
  }
  const std::string pick = op == "spmm" ? fmt::format("spmm_pick({0}_variants, {0}_variant_count(), n)", fn)
                                        : fmt::format("sddmm_pick({0}_variants, {0}_variant_count())", fn);
  c += fmt::format(R"C(static int check_{0}(const {1}_{4}_args* x) {{
{2}  return {3}_OK;
}}
static int run_{0}(const {4}_variant* v, const {1}_{4}_args* x) {{ return {5}; }}

int {0}_variant_for(int64_t m, int64_t n, int64_t k) {{
  (void)m, (void)n, (void)k;
  const {4}_variant* v = {6};
  return v ? (int)(v - {0}_variants) : -1;
}}
int {0}(const {1}_{4}_args* x) {{
  const int status = check_{0}(x);
  if (status) return status;
  const int64_t n = {7};
  const {4}_variant* v = {6};
  (void)n;
  if (!v) {{
    snprintf(last_error, sizeof last_error, "{0}: no variant for this CPU (ISA %s)", {1}_isa());
    return {3}_ENOCPU;
  }}
  return run_{0}(v, x);
}}

)C",
                   fn, lib, checks, c_upper(lib), op, run, pick, op == "spmm" ? "x->n" : "0");
  return c + variant_accessors(fn, lib + "_" + op + "_args", "run_" + fn) + "\n";
}

}  // namespace tessera
