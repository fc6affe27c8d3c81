// Attention in a kernel library's C header and driver: the args type (rank-4 tensors by strides, variable lengths by
// offsets), the argument checks, the variant for a shape, and the run through tessera's own attention schedule
// (ops/attention/attention_schedule.cpp, compiled beside the driver behind a C function) on the driver's pool.
#include <fmt/format.h>

#include "ops/library/library_c_parts.hpp"

namespace tessera {

namespace {

std::string attention_comment(const AttentionSignature& s) {
  std::string text = fmt::format(
      " * O = softmax(score_mod(scale·Q·Kᵀ))·V, {} Q, K, V, O with unit head-dimension strides; head_dim {}{}{}{}\n"
      " * score_mod: {}\n",
      dtype_name(s.dtype), s.head_dim_qk, s.head_dim_v != s.head_dim_qk ? fmt::format(", V's {}", s.head_dim_v) : "",
      s.causal ? "; causal (aligned bottom-right)" : "", s.lse ? "; writes the log-sum-exp per query row" : "",
      s.score_mod.text());
  const auto& scalars = s.score_mod.scalars();
  for (std::size_t i = 0; i < scalars.size(); ++i) text += fmt::format(" * scalars[{}]: {}\n", i, scalars[i]);
  return text;
}

// The driver's EXT_ bit for the extension a variant's kernel needs: bf16 products on vdpbf16ps.
const char* attention_extensions(const CpuAttentionSpec& spec) {
  return spec.signature.dtype == DType::bf16 && spec.target.avx512_bf16 ? "EXT_AVX512_BF16" : "0";
}

}  // namespace

std::string attention_header_types(const std::string& lib) {
  return fmt::format(
      R"C(/* A rank-4 tensor: element [b, h, s, d] at data + b·strides[0] + h·strides[1] + s·strides[2] + d·strides[3]
 * (elements). */
typedef struct {0}_tensor4 {{
  const void* data;
  int64_t strides[4];
}} {0}_tensor4;

/* Attention: Q and O [batch, heads, seq_q, head_dim], K and V [batch, kv_heads, seq_kv, head_dim] (BSHD and BHSD are
 * both strides); query head h reads KV head h / (heads / kv_heads). Variable lengths: offsets_q and offsets_kv hold
 * batch + 1 cumulative offsets into the seq dimension of packed tensors (their batch strides are then ignored, and
 * seq_q, seq_kv too). O must not overlap Q, K or V. */
typedef struct {0}_attention_args {{
  int64_t batch, heads, kv_heads, seq_q, seq_kv;
  const int64_t* offsets_q; /* NULL, or batch + 1 entries (both or neither) */
  const int64_t* offsets_kv;
  {0}_tensor4 q, k, v, o;
  float* lse; /* [batch, heads, seq_q] f32 at lse_strides, where the kernel writes it (else ignored) */
  int64_t lse_strides[3];
  const float* scalars; /* the score modifier's scalars, in the order each function lists */
  float scale;          /* 0: 1/sqrt(head_dim) */
  int threads;          /* 0: the library's setting */
}} {0}_attention_args;

)C",
      lib);
}

std::string attention_header_kernel(const std::string& lib, const ResolvedKernel& r) {
  const std::string fn = lib + "_" + r.kernel.name;
  std::string h = fmt::format("/* {}:\n{} *\n * Variants (the call picks by the CPU's ISA and the nearest lengths):\n",
                              fn, attention_comment(std::get<AttentionSignature>(r.kernel.signature)));
  for (std::size_t i = 0; i < r.variants.size(); ++i) {
    const LibraryShape& s = r.variants[i].chosen_for;
    h += fmt::format(" *   {}: {} chosen for seq_q {}, seq_kv {}, {}/{} heads\n", i, r.variants[i].symbol(), s.m, s.n,
                     s.heads, s.kv_heads);
  }
  h += fmt::format(
      " */\n"
      "int {0}(const {1}_attention_args* args);\n"
      "/* The variant {0} runs for query and key lengths and heads per KV head on this CPU (-1: none), and each\n"
      " * variant by index. */\n"
      "int {0}_variant_for(int64_t seq_q, int64_t seq_kv, int64_t group);\n"
      "int {0}_variant_count(void);\n"
      "const char* {0}_variant_name(int variant);\n"
      "int {0}_run_variant(int variant, const {1}_attention_args* args);\n\n",
      fn, lib);
  return h;
}

std::string attention_shim(const std::string& lib) {
  return fmt::format(
      R"C(// The attention schedule of {0}'s driver: tessera's own (ops/attention/attention_schedule.cpp) behind a C function.
#include <cstdint>

#include "ops/attention/attention_schedule.hpp"

using Task = void (*)(const void*, std::int64_t, void*);

extern "C" int {0}__attention_run(
    const std::int64_t* sizes, const std::int64_t* offsets_q, const std::int64_t* offsets_kv, int o_bf16,
    std::int64_t element_bytes, const void* const* data, const std::int64_t* strides, float* lse,
    const std::int64_t* lse_strides, const float* scalars, float scale, const std::int64_t* blocking,
    tessera::AttentionKernelFn kernel, tessera::AttentionPackFn pack, void* self, int threads,
    void (*run)(void*, std::int64_t, std::int64_t, Task, const void*), void* (*allocate)(void*, std::int64_t),
    void (*release)(void*, void*)) {{
  tessera::AttentionCall c;
  c.batch = sizes[0], c.heads = sizes[1], c.kv_heads = sizes[2], c.seq_q = sizes[3], c.seq_kv = sizes[4];
  c.head_dim_v = sizes[5];
  c.offsets_q = offsets_q, c.offsets_kv = offsets_kv;
  c.o_bf16 = o_bf16 != 0;
  tessera::AttentionView* views[4] = {{&c.q, &c.k, &c.v, &c.o}};
  for (int i = 0; i < 4; ++i) {{
    const std::int64_t* s = strides + 4 * i;
    *views[i] = {{static_cast<const std::byte*>(data[i]), offsets_q ? 0 : s[0], s[1], s[2], s[3], element_bytes}};
  }}
  c.lse = lse, c.lse_batch = offsets_q ? 0 : lse_strides[0], c.lse_head = lse_strides[1], c.lse_seq = lse_strides[2];
  c.scalars = scalars;
  c.scale = scale;
  tessera::AttentionBlocking k;
  k.block_q = static_cast<int>(blocking[0]), k.block_kv = static_cast<int>(blocking[1]), k.in_place = blocking[2] != 0;
  k.packed_block_floats = blocking[3], k.workspace_bytes = blocking[4];
  tessera::AttentionKernels kernels;
  kernels.run = kernel, kernels.pack = pack;
  tessera::AttentionExecutor executor;
  executor.self = self, executor.threads = threads, executor.run = run, executor.allocate = allocate;
  executor.release = release;
  return tessera::run_attention(c, k, kernels, executor);
}}
)C",
      lib);
}

std::string attention_driver_common(const std::string& lib) {
  return fmt::format(
      R"C(/* Attention kernels' entries (tessera's AttentionKernelFn, AttentionPackFn) and their variants. */
typedef void (*attention_kernel_fn)(const void* block_args, void* workspace);
typedef void (*attention_pack_fn)(const void* block_args, int64_t block, float* dst);
typedef struct {{
  attention_kernel_fn fn;
  attention_pack_fn pack;
  const char* symbol;
  int isa, extensions;
  int64_t blocking[5]; /* block_q, block_kv, in place, floats of a packed key block, scratch bytes */
  int64_t hint_q, hint_kv, hint_group;
}} attention_variant;

typedef void (*schedule_task)(const void* context, int64_t task, void* scratch);
int {0}__attention_run(const int64_t* sizes, const int64_t* offsets_q, const int64_t* offsets_kv, int o_bf16,
                       int64_t element_bytes, const void* const* data, const int64_t* strides, float* lse,
                       const int64_t* lse_strides, const float* scalars, float scale, const int64_t* blocking,
                       attention_kernel_fn kernel, attention_pack_fn pack, void* self, int threads,
                       void (*run)(void*, int64_t, int64_t, schedule_task, const void*),
                       void* (*allocate)(void*, int64_t), void (*release)(void*, void*));

/* The schedule's executor: this driver's pool (tasks one at a time from the shared counter) and allocator. */
typedef struct {{
  schedule_task task;
  const void* context;
}} schedule_job;
static void schedule_tasks(const void* context, void* ws, int64_t begin, int64_t end) {{
  const schedule_job* job = (const schedule_job*)context;
  for (int64_t t = begin; t < end; ++t) job->task(job->context, t, ws);
}}
static void schedule_run(void* self, int64_t count, int64_t scratch_bytes, schedule_task task, const void* context) {{
  const int threads = *(const int*)self;
  const schedule_job job = {{task, context}};
  (void)scratch_bytes; /* at most MAX_WORKSPACE: every thread's scratch is that large */
  run_job("attention", schedule_tasks, &job, count, count < threads ? (int)count : threads);
}}
static void* schedule_allocate(void* self, int64_t bytes) {{
  (void)self;
  return aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64));
}}
static void schedule_release(void* self, void* buffer) {{
  (void)self;
  free(buffer);
}}

static const attention_variant* attention_pick(const attention_variant* vs, int count, int64_t seq_q, int64_t seq_kv,
                                               int64_t group) {{
  const attention_variant* best = NULL;
  double best_distance = 0;
  for (int i = 0; i < count; ++i) {{
    const attention_variant* v = &vs[i];
    if (!runs_here(v->isa, v->extensions)) continue;
    /* The widest ISA first, then the variant chosen for the nearest lengths (a few queries read their keys in
     * place; many pack them) and group. */
    const double rq = (double)(seq_q > 0 ? seq_q : 1) / (double)v->hint_q,
                 rk = (double)(seq_kv > 0 ? seq_kv : 1) / (double)v->hint_kv,
                 rg = (double)(group > 0 ? group : 1) / (double)v->hint_group;
    const double distance = (rq > 1 ? rq : 1 / rq) * (rq > 1 ? rq : 1 / rq) * (rk > 1 ? rk : 1 / rk) * (rg > 1 ? rg : 1 / rg);
    if (!best || v->isa > best->isa || (v->isa == best->isa && distance < best_distance)) {{
      best = v;
      best_distance = distance;
    }}
  }}
  return best;
}}

/* A rank-4 tensor's checks: data where it has elements, no negative stride, a unit head-dimension stride. */
static int check_tensor4(const char* fn, const char* name, const {0}_tensor4* t, int64_t elements) {{
  if (elements > 0 && !t->data) return failf("%s: %s.data is null", fn, name);
  for (int d = 0; d < 4; ++d)
    if (t->strides[d] < 0) return failf("%s: %s.strides[%d] is negative", fn, name, d);
  if (t->strides[3] != 1) return failf("%s: %s.strides[3] (the head dimension's) must be 1", fn, name);
  return {1}_OK;
}}
static int check_offsets(const char* fn, const char* name, const int64_t* offsets, int64_t batch) {{
  if (offsets[0] != 0) return failf("%s: %s[0] is %lld, must be 0", fn, name, (long long)offsets[0]);
  for (int64_t b = 1; b <= batch; ++b)
    if (offsets[b] < offsets[b - 1])
      return failf("%s: %s must not decrease: [%lld] is %lld after %lld", fn, name, (long long)b,
                   (long long)offsets[b], (long long)offsets[b - 1]);
  return {1}_OK;
}}

static int attention_run(const attention_variant* v, const {0}_attention_args* x, int64_t head_dim,
                         int64_t head_dim_v, int bf16) {{
  if (!runs_here(v->isa, v->extensions)) {{
    snprintf(last_error, sizeof last_error, "%s: this CPU lacks the ISA or an extension (bf16) of variant %s", "{0}",
             v->symbol);
    return {1}_ENOCPU;
  }}
  const int64_t sizes[6] = {{x->batch, x->heads, x->kv_heads, x->seq_q, x->seq_kv, head_dim_v}};
  const void* data[4] = {{x->q.data, x->k.data, x->v.data, x->o.data}};
  int64_t strides[16];
  const {0}_tensor4* tensors[4] = {{&x->q, &x->k, &x->v, &x->o}};
  for (int i = 0; i < 4; ++i)
    for (int d = 0; d < 4; ++d) strides[4 * i + d] = tensors[i]->strides[d];
  const float scale = x->scale != 0 ? x->scale : (float)(1.0 / sqrt((double)head_dim));
  int threads = call_threads(x->threads);
  if (!thread_scratch()) {{
    snprintf(last_error, sizeof last_error, "%s: no memory for %zu bytes of scratch", v->symbol, (size_t)MAX_WORKSPACE);
    return {1}_ENOMEM;
  }}
  last_error[0] = 0;
  if ({0}__attention_run(sizes, x->offsets_q, x->offsets_kv, bf16, bf16 ? 2 : 4, data, strides, x->lse,
                         x->lse_strides, x->scalars, scale, v->blocking, v->fn, v->pack, &threads, threads,
                         schedule_run, schedule_allocate, schedule_release) != 0) {{
    snprintf(last_error, sizeof last_error, "%s: no memory for the packed keys or the split keys' outputs", v->symbol);
    return {1}_ENOMEM;
  }}
  return {1}_OK;
}}

)C",
      lib, c_upper(lib));
}

std::string attention_driver_kernel(const std::string& lib, const ResolvedKernel& r) {
  const std::string fn = lib + "_" + r.kernel.name;
  const AttentionSignature& s = std::get<AttentionSignature>(r.kernel.signature);
  std::string c;
  for (const auto& v : r.variants)
    c += fmt::format("void {0}(const void*, void*);\nvoid {0}_pack(const void*, int64_t, float*);\n", v.symbol());
  c += fmt::format("static const attention_variant {}_variants[] = {{\n", fn);
  for (const auto& v : r.variants) {
    const CpuAttentionSpec& spec = std::get<CpuAttentionSpec>(v.spec);
    const CpuAttentionConfig& k = spec.config;
    c += fmt::format("    {{{0}, {0}_pack, \"{0}\", {1}, {2}, {{{3}, {4}, {5}, {6}, {7}}}, {8}, {9}, {10}}},\n",
                     v.symbol(), v.tier(), attention_extensions(spec), k.block_q, k.block_kv, int{k.in_place},
                     k.packed_block_floats(spec.signature, spec.target), k.workspace_bytes(spec.signature, spec.target),
                     v.chosen_for.m, v.chosen_for.n, v.chosen_for.heads / v.chosen_for.kv_heads);
  }
  c += "};\n\n";
  std::string checks = fmt::format(
      "  if (!x) return fail(\"{0}: args is null\");\n"
      "  if (x->threads < 0) return fail(\"{0}: threads must be >= 0\");\n"
      "  if (x->batch < 0 || x->heads < 0 || x->kv_heads < 0 || x->seq_q < 0 || x->seq_kv < 0)\n"
      "    return fail(\"{0}: batch, heads, kv_heads, seq_q and seq_kv must be >= 0\");\n"
      "  if (x->batch >= 2147483648LL || x->heads >= 2147483648LL || x->seq_q >= 2147483648LL ||\n"
      "      x->seq_kv >= 2147483648LL)\n"
      "    return fail(\"{0}: batch, heads, seq_q and seq_kv must be below 2^31\");\n"
      "  if (x->heads > 0 && (x->kv_heads == 0 || x->heads % x->kv_heads != 0))\n"
      "    return fail(\"{0}: heads must be a multiple of kv_heads\");\n"
      "  if (!x->offsets_q != !x->offsets_kv) return fail(\"{0}: give both offsets_q and offsets_kv, or neither\");\n"
      "  int64_t rows_q = x->batch * x->seq_q, rows_kv = x->batch * x->seq_kv;\n"
      "  if (x->offsets_q) {{\n"
      "    int status = check_offsets(\"{0}\", \"offsets_q\", x->offsets_q, x->batch);\n"
      "    if (!status) status = check_offsets(\"{0}\", \"offsets_kv\", x->offsets_kv, x->batch);\n"
      "    if (status) return status;\n"
      "    rows_q = x->offsets_q[x->batch], rows_kv = x->offsets_kv[x->batch];\n"
      "  }}\n"
      "  {{\n"
      "    int status = check_tensor4(\"{0}\", \"q\", &x->q, rows_q * x->heads);\n"
      "    if (!status) status = check_tensor4(\"{0}\", \"k\", &x->k, rows_kv * x->kv_heads);\n"
      "    if (!status) status = check_tensor4(\"{0}\", \"v\", &x->v, rows_kv * x->kv_heads);\n"
      "    if (!status) status = check_tensor4(\"{0}\", \"o\", &x->o, rows_q * x->heads);\n"
      "    if (status) return status;\n"
      "  }}\n"
      "  if (!isfinite(x->scale)) return fail(\"{0}: scale must be finite\");\n",
      fn);
  if (s.lse)
    checks += fmt::format(
        "  if (!x->lse && rows_q * x->heads > 0) return fail(\"{0}: lse is null\");\n"
        "  if (x->lse_strides[0] < 0 || x->lse_strides[1] < 0 || x->lse_strides[2] < 0)\n"
        "    return fail(\"{0}: lse_strides must be >= 0\");\n",
        fn);
  if (!s.score_mod.scalars().empty())
    checks += fmt::format("  if (!x->scalars) return fail(\"{}: scalars is null ({} expected)\");\n", fn,
                          s.score_mod.scalars().size());
  c += fmt::format(R"C(static int check_{0}(const {1}_attention_args* x) {{
{2}  return {3}_OK;
}}
static int run_{0}(const attention_variant* v, const {1}_attention_args* x) {{
  {1}_attention_args y = *x;
  if (!{4}) y.lse = NULL;
  return attention_run(v, &y, {5}, {6}, {7});
}}

int {0}_variant_for(int64_t seq_q, int64_t seq_kv, int64_t group) {{
  const attention_variant* v = attention_pick({0}_variants, {0}_variant_count(), seq_q, seq_kv, group);
  return v ? (int)(v - {0}_variants) : -1;
}}
int {0}(const {1}_attention_args* x) {{
  const int status = check_{0}(x);
  if (status) return status;
  int64_t longest = x->seq_q;
  if (x->offsets_q) {{
    longest = 0;
    for (int64_t b = 0; b < x->batch; ++b)
      if (x->offsets_q[b + 1] - x->offsets_q[b] > longest) longest = x->offsets_q[b + 1] - x->offsets_q[b];
  }}
  const attention_variant* v = attention_pick({0}_variants, {0}_variant_count(), longest, x->seq_kv,
                                              x->kv_heads > 0 ? x->heads / x->kv_heads : 1);
  if (!v) {{
    snprintf(last_error, sizeof last_error, "{0}: no variant for this CPU (ISA %s)", {1}_isa());
    return {3}_ENOCPU;
  }}
  return run_{0}(v, x);
}}

)C",
                   fn, lib, checks, c_upper(lib), s.lse ? 1 : 0, s.head_dim_qk, s.head_dim_v,
                   s.dtype == DType::bf16 ? 1 : 0);
  return c + variant_accessors(fn, lib + "_attention_args", "run_" + fn) + "\n";
}

}  // namespace tessera
