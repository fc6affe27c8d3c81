// GEMM in a kernel library's C header and driver: the args type, the kernels' calling convention (GemmKernelArgs),
// the variant table, the choice of a variant for a shape and the grid from tessera's own planner.
#include <fmt/format.h>

#include <stdexcept>

#include "ops/library/library_c_parts.hpp"

namespace tessera {

namespace {

// What a caller must pass for each operand and input, as a comment in the header.
std::string signature_comment(const GemmSignature& s) {
  std::string text = fmt::format(" * D = {}\n * A: {} M×K {}; B: {} K×N {}; D: {} M×N {}", s.epilogue.text(),
                                 dtype_name(s.a.dtype), layout_word(s.a.layout), dtype_name(s.b.dtype),
                                 layout_word(s.b.layout), dtype_name(s.d.dtype), layout_word(s.d.layout));
  if (s.c.layout.reads_memory())
    text += fmt::format("; C: f32 M×N {} (read: the epilogue names c)", layout_word(s.c.layout));
  return text + "\n" + inputs_comment(s.inputs);
}

// The driver's EXT_ bit for the extension a variant's kernel needs.
std::string variant_extensions(const CpuGemmSpec& spec) {
  const std::string_view extension = spec.required_extension();
  if (extension.empty()) return "0";
  if (extension == "avx512vnni") return "EXT_AVX512_VNNI";
  if (extension == "avxvnni") return "EXT_AVX_VNNI";
  if (extension == "avx512bf16") return "EXT_AVX512_BF16";
  throw std::logic_error("library: no driver bit for the extension " + std::string(extension));
}

}  // namespace

std::string gemm_header_types(const std::string& lib) {
  return fmt::format(R"C(/* D[b] = epilogue(A[b]·B[b], ...) for b < batch. */
typedef struct {0}_gemm_args {{
  int64_t m, n, k, batch;
  {0}_tensor a, b, c, d;
  const {0}_tensor* inputs; /* the epilogue's tensors, in the order each function lists */
  float alpha, beta;
  int threads; /* 0: the library's setting */
}} {0}_gemm_args;

)C",
                     lib);
}

std::string gemm_header_kernel(const std::string& lib, const ResolvedKernel& r) {
  const std::string fn = lib + "_" + r.kernel.name;
  std::string h = fmt::format("/* {}:\n{} *\n * Variants (the call picks by the CPU's ISA and the shape):\n", fn,
                              signature_comment(std::get<GemmSignature>(r.kernel.signature)));
  for (std::size_t i = 0; i < r.variants.size(); ++i) {
    const LibraryVariant& v = r.variants[i];
    const CpuGemmConfig& k = std::get<CpuGemmSpec>(v.spec).config;
    h += fmt::format(" *   {}: {} chosen for {}x{}x{}{}\n", i, v.symbol(), v.chosen_for.m, v.chosen_for.n,
                     v.chosen_for.k, k.fixed() ? fmt::format(" (only {}x{}x{})", k.fixed_m, k.fixed_n, k.fixed_k) : "");
  }
  h += fmt::format(
      " */\n"
      "int {0}(const {1}_gemm_args* args);\n"
      "/* The variant {0} runs for a shape on this CPU (-1: none), and each variant by index. */\n"
      "int {0}_variant_for(int64_t m, int64_t n, int64_t k);\n"
      "int {0}_variant_count(void);\n"
      "const char* {0}_variant_name(int variant);\n"
      "int {0}_run_variant(int variant, const {1}_gemm_args* args);\n\n",
      fn, lib);
  return h;
}

std::string gemm_driver_common(const std::string& lib) {
  return fmt::format(R"C(/* GEMM kernels' calling convention (tessera's GemmKernelArgs). */
typedef struct {{
  int64_t m, n, k, batch, tile_m, tile_n;
  {0}_tensor a, b, c, d;
  const {0}_tensor* inputs;
  float alpha, beta;
}} gemm_kernel_args;
typedef void (*gemm_kernel_fn)(const gemm_kernel_args*, void* workspace, int64_t tile_begin, int64_t tile_end);
typedef struct {{
  gemm_kernel_fn fn;
  const char* symbol;
  int isa, extensions;
  int64_t mr, nr, mc, nc;
  int pack_a, pack_b, amx;
  int64_t fixed_m, fixed_n, fixed_k, fixed_parts, fixed_part_rows;
  int64_t hint_m, hint_n, hint_k;
  size_t workspace;
}} gemm_variant;
typedef struct {{
  gemm_kernel_fn fn;
  const gemm_kernel_args* args;
}} gemm_job;
static void gemm_tiles(const void* context, void* ws, int64_t begin, int64_t end) {{
  const gemm_job* job = (const gemm_job*)context;
  job->fn(job->args, ws, begin, end);
}}

/* The grid: tessera's own planner (generator/gemm/grid_plan.cpp, compiled beside this file), as the runtime plans. */
int64_t {0}__plan_grid(int64_t m, int64_t n, int64_t k, int64_t batch, int64_t mr, int64_t nr, int64_t mc, int64_t nc,
                       int pack_a, int pack_b, int64_t fixed_m, int64_t fixed_parts, int64_t fixed_part_rows,
                       int amx, int threads, int64_t* tile_m, int64_t* tile_n, int* participants);

static const gemm_variant* gemm_pick(const gemm_variant* vs, int count, int64_t m, int64_t n, int64_t k) {{
  const gemm_variant* best = NULL;
  double best_distance = 0;
  for (int i = 0; i < count; ++i) {{
    const gemm_variant* v = &vs[i];
    if (!runs_here(v->isa, v->extensions)) continue;
    if (v->fixed_m) {{
      if (v->fixed_m == m && v->fixed_n == n && v->fixed_k == k && (!best || best->fixed_m == 0 || v->isa > best->isa))
        best = v;
      continue;
    }}
    if (best && best->fixed_m) continue;
    /* The widest ISA first, then the variant chosen for the nearest shape (in ratios of the extents). */
    const double rm = (double)(m > 0 ? m : 1) / (double)v->hint_m, rn = (double)(n > 0 ? n : 1) / (double)v->hint_n,
                 rk = (double)(k > 0 ? k : 1) / (double)v->hint_k;
    const double distance = (rm > 1 ? rm : 1 / rm) * (rn > 1 ? rn : 1 / rn) * (rk > 1 ? rk : 1 / rk);
    if (!best || v->isa > best->isa || (v->isa == best->isa && distance < best_distance)) {{
      best = v;
      best_distance = distance;
    }}
  }}
  return best;
}}

static int gemm_run(const gemm_variant* v, const {0}_gemm_args* x) {{
  if (!runs_here(v->isa, v->extensions)) {{
    snprintf(last_error, sizeof last_error, "%s: this CPU lacks the ISA or an extension (VNNI, bf16) of variant %s",
             "{0}", v->symbol);
    return {1}_ENOCPU;
  }}
  if (v->fixed_m && (x->m != v->fixed_m || x->n != v->fixed_n || x->k != v->fixed_k)) {{
    snprintf(last_error, sizeof last_error, "%s runs only %lldx%lldx%lld", v->symbol, (long long)v->fixed_m,
             (long long)v->fixed_n, (long long)v->fixed_k);
    return {1}_EINVAL;
  }}
  gemm_kernel_args a;
  a.m = x->m, a.n = x->n, a.k = x->k, a.batch = x->batch;
  a.a = x->a, a.b = x->b, a.c = x->c, a.d = x->d;
  a.inputs = x->inputs;
  a.alpha = x->alpha, a.beta = x->beta;
  int participants = 1;
  const int64_t tiles = {0}__plan_grid(x->m, x->n, x->k, x->batch, v->mr, v->nr, v->mc, v->nc, v->pack_a, v->pack_b,
                                       v->fixed_m, v->fixed_parts, v->fixed_part_rows, v->amx,
                                       call_threads(x->threads), &a.tile_m, &a.tile_n, &participants);
  last_error[0] = 0;
  const gemm_job job = {{v->fn, &a}};
  return run_job(v->symbol, gemm_tiles, &job, tiles, participants);
}}

)C",
                     lib, c_upper(lib));
}

std::string gemm_driver_kernel(const std::string& lib, const ResolvedKernel& r) {
  const std::string fn = lib + "_" + r.kernel.name;
  const GemmSignature& s = std::get<GemmSignature>(r.kernel.signature);
  std::string c;
  for (const auto& v : r.variants)
    c += fmt::format("void {}(const gemm_kernel_args*, void*, int64_t, int64_t);\n", v.symbol());
  c += fmt::format("static const gemm_variant {}_variants[] = {{\n", fn);
  for (const auto& v : r.variants) {
    const CpuGemmSpec& spec = std::get<CpuGemmSpec>(v.spec);
    const CpuGemmConfig& k = spec.config;
    c += fmt::format(
        "    {{{0}, \"{0}\", {1}, {17}, {2}, {3}, {4}, {5}, {6}, {7}, {18}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, "
        "{15}, {16}}},\n",
        v.symbol(), v.tier(), k.mr, k.nr, k.mc, k.nc, int{k.pack_a}, int{k.pack_b}, k.fixed_m, k.fixed_n, k.fixed_k,
        k.fixed_row_parts(), k.fixed() ? k.fixed_part_rows() : 0, v.chosen_for.m, v.chosen_for.n, v.chosen_for.k,
        k.workspace_bytes(), variant_extensions(spec), int{k.amx == CpuGemmConfig::kAmxTiles});
  }
  c += "};\n\n";
  // The argument checks: what tessera's runtime checks before a call (shapes, strides for the layouts, data).
  std::string checks = fmt::format(
      "  if (!x) return fail(\"{0}: args is null\");\n"
      "  if (x->m < 0 || x->n < 0 || x->k < 0 || x->batch < 0) return fail(\"{0}: m, n, k and batch must be >= "
      "0\");\n"
      "  if (x->m >= 2147483648LL || x->n >= 2147483648LL || x->k >= 2147483648LL || x->batch >= 2147483648LL)\n"
      "    return fail(\"{0}: m, n, k and batch must be below 2^31\");\n"
      "  if (x->threads < 0) return fail(\"{0}: threads must be >= 0\");\n",
      fn);
  checks += operand_checks(fn, "a", s.a.layout, "x->m", "x->k", true);
  checks += operand_checks(fn, "b", s.b.layout, "x->k", "x->n", true);
  checks += operand_checks(fn, "d", s.d.layout, "x->m", "x->n", true);
  if (s.c.layout.reads_memory()) checks += operand_checks(fn, "c", s.c.layout, "x->m", "x->n", true);
  checks += input_checks(fn, s.inputs, "x->m", "x->n");
  c += fmt::format(R"C(static int check_{0}(const {1}_gemm_args* x) {{
{2}  return {3}_OK;
}}

int {0}_variant_for(int64_t m, int64_t n, int64_t k) {{
  const gemm_variant* v = gemm_pick({0}_variants, {0}_variant_count(), m, n, k);
  return v ? (int)(v - {0}_variants) : -1;
}}
int {0}(const {1}_gemm_args* x) {{
  const int status = check_{0}(x);
  if (status) return status;
  const gemm_variant* v = gemm_pick({0}_variants, {0}_variant_count(), x->m, x->n, x->k);
  if (!v) {{
    snprintf(last_error, sizeof last_error, "{0}: no variant for this CPU (ISA %s)", {1}_isa());
    return {3}_ENOCPU;
  }}
  return gemm_run(v, x);
}}

)C",
                   fn, lib, checks, c_upper(lib));
  return c + variant_accessors(fn, lib + "_gemm_args", "gemm_run") + "\n";
}

}  // namespace tessera
