/* Calls every variant of every kernel of the library built from tests/library/manifest.json, on several shapes and
 * thread counts, and checks each result against a double-precision reference computed here. Exit 0: all agree. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tlib.h"

static int failures = 0;

static float* random_matrix(int64_t count, unsigned* seed) {
  float* x = malloc(sizeof(float) * (size_t)(count > 0 ? count : 1));
  for (int64_t i = 0; i < count; ++i) {
    *seed = *seed * 1103515245u + 12345u;
    x[i] = (float)((int)((*seed >> 16) % 7) - 3); /* exact small integers */
  }
  return x;
}

/* The kernels: 0 matmul (alpha*acc), 1 linear_relu (B col-major, relu(alpha*acc + bias[n])), 2 scaled_residual
 * (A and C/D col-major, scale[m]*acc + beta*c + residual[m,n]). */
typedef int (*run_fn)(int, const tlib_gemm_args*);
static const char* (*name_fns[3])(int) = {tlib_matmul_variant_name, tlib_linear_relu_variant_name,
                                          tlib_scaled_residual_variant_name};
static int (*count_fns[3])(void) = {tlib_matmul_variant_count, tlib_linear_relu_variant_count,
                                    tlib_scaled_residual_variant_count};
static run_fn run_fns[3] = {tlib_matmul_run_variant, tlib_linear_relu_run_variant, tlib_scaled_residual_run_variant};

static void check(int kernel, int variant, int64_t m, int64_t n, int64_t k, int64_t batch, int threads) {
  unsigned seed = (unsigned)(m * 7919 + n * 31 + k + batch);
  const int a_col = kernel == 2, b_col = kernel == 1, d_col = kernel == 2;
  float* a = random_matrix(batch * m * k, &seed);
  float* b = random_matrix(batch * k * n, &seed);
  float* c = random_matrix(batch * m * n, &seed);
  float* bias = random_matrix(n, &seed);
  float* scale = random_matrix(m, &seed);
  float* residual = random_matrix(m * n, &seed);
  float* d = malloc(sizeof(float) * (size_t)(batch * m * n > 0 ? batch * m * n : 1));
  for (int64_t i = 0; i < batch * m * n; ++i) d[i] = NAN;
  tlib_gemm_args x;
  memset(&x, 0, sizeof x);
  x.m = m, x.n = n, x.k = k, x.batch = batch, x.threads = threads;
  x.alpha = kernel == 0 ? 0.5f : 1.0f;
  x.beta = 2.0f;
  x.a = (tlib_tensor){a, a_col ? 1 : k, a_col ? m : 1, m * k};
  x.b = (tlib_tensor){b, b_col ? 1 : n, b_col ? k : 1, k * n};
  x.c = (tlib_tensor){c, d_col ? 1 : n, d_col ? m : 1, m * n};
  x.d = (tlib_tensor){d, d_col ? 1 : n, d_col ? m : 1, m * n};
  tlib_tensor inputs[2];
  if (kernel == 1) inputs[0] = (tlib_tensor){bias, 0, 1, 0};
  if (kernel == 2) { /* in the header's order */
    inputs[0] = (tlib_tensor){residual, n, 1, 0};
    inputs[1] = (tlib_tensor){scale, 1, 0, 0};
  }
  x.inputs = kernel ? inputs : NULL;
  const int status = run_fns[kernel](variant, &x);
  if (status != TLIB_OK) {
    printf("FAIL %s %lldx%lldx%lld batch %lld threads %d: status %d: %s\n", name_fns[kernel](variant), (long long)m,
           (long long)n, (long long)k, (long long)batch, threads, status, tlib_last_error());
    ++failures;
  } else {
    int bad = 0;
    for (int64_t q = 0; q < batch && !bad; ++q)
      for (int64_t i = 0; i < m && !bad; ++i)
        for (int64_t j = 0; j < n && !bad; ++j) {
          double acc = 0;
          for (int64_t p = 0; p < k; ++p)
            acc += (double)a[q * m * k + (a_col ? p * m + i : i * k + p)] *
                   (double)b[q * k * n + (b_col ? j * k + p : p * n + j)];
          const int64_t at = q * m * n + (d_col ? j * m + i : i * n + j);
          double want = x.alpha * acc;
          if (kernel == 1) want = want + bias[j] > 0 ? want + bias[j] : 0;
          if (kernel == 2) want = scale[i] * acc + x.beta * c[at] + residual[i * n + j];
          if (!(fabs(d[at] - want) <= 1e-3 * (1 + fabs(want)))) {
            printf("FAIL %s %lldx%lldx%lld batch %lld threads %d: d[%lld,%lld,%lld] = %g, expected %g\n",
                   name_fns[kernel](variant), (long long)m, (long long)n, (long long)k, (long long)batch, threads,
                   (long long)q, (long long)i, (long long)j, d[at], want);
            bad = 1;
          }
        }
    failures += bad;
  }
  free(a), free(b), free(c), free(bias), free(scale), free(residual), free(d);
}

/* qlinear: u8 A × i8 B (row-major), D u8 = saturate(rint(scale[n] * sum + 128)), against int64 sums here. Returns
 * 0 when the variant needs an extension this CPU lacks (the call says so), 1 when checked. */
static int check_int8(int variant, int64_t m, int64_t n, int64_t k, int threads) {
  unsigned seed = (unsigned)(m * 31 + n * 7 + k);
  uint8_t* a = malloc((size_t)(m * k > 0 ? m * k : 1));
  int8_t* b = malloc((size_t)(k * n > 0 ? k * n : 1));
  uint8_t* d = malloc((size_t)(m * n > 0 ? m * n : 1));
  float* scale = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < m * k; ++i) a[i] = (uint8_t)((seed = seed * 1103515245u + 12345u) >> 16);
  for (int64_t i = 0; i < k * n; ++i) b[i] = (int8_t)((seed = seed * 1103515245u + 12345u) >> 16);
  for (int64_t j = 0; j < n; ++j) scale[j] = 0.0009765625f * (float)(j % 7 + 1); /* 2^-10 multiples: exact */
  memset(d, 0x5a, (size_t)(m * n > 0 ? m * n : 1));
  tlib_gemm_args x;
  memset(&x, 0, sizeof x);
  x.m = m, x.n = n, x.k = k, x.batch = 1, x.threads = threads, x.alpha = 1.0f;
  x.a = (tlib_tensor){a, k, 1, 0};
  x.b = (tlib_tensor){b, n, 1, 0};
  x.d = (tlib_tensor){d, n, 1, 0};
  tlib_tensor inputs[1] = {{scale, 0, 1, 0}};
  x.inputs = inputs;
  const int status = tlib_qlinear_run_variant(variant, &x);
  int checked = 1;
  if (status == TLIB_ENOCPU) {
    checked = 0;
  } else if (status != TLIB_OK) {
    printf("FAIL %s %lldx%lldx%lld: status %d: %s\n", tlib_qlinear_variant_name(variant), (long long)m, (long long)n,
           (long long)k, status, tlib_last_error());
    ++failures;
  } else {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        long long sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += (long long)a[i * k + p] * b[p * n + j];
        /* The f32 epilogue may round the product or use an FMA: either neighbour is right near a .5 boundary. */
        const double exact = (double)scale[j] * (double)sum + 128.0, v = rint(exact);
        const int want = v < 0 ? 0 : v > 255 ? 255 : (int)v;
        const int slack = fabs(fabs(exact - floor(exact)) - 0.5) < 1e-3 * (1 + fabs(exact)) ? 1 : 0;
        if (abs((int)d[i * n + j] - want) > slack) {
          printf("FAIL %s %lldx%lldx%lld: d[%lld,%lld] = %d, expected %d\n", tlib_qlinear_variant_name(variant),
                 (long long)m, (long long)n, (long long)k, (long long)i, (long long)j, d[i * n + j], want);
          ++failures;
          i = m;
          break;
        }
      }
  }
  free(a), free(b), free(d), free(scale);
  return checked;
}

/* A random sparse pattern of `rows` × `cols` blocks (CSR: 1×1), each present with probability `percent`/100, some
 * rows left empty; offsets and indices as int32 or int64. Returns the number of blocks. */
static int64_t random_pattern(int64_t rows, int64_t cols, int percent, int wide, void** offsets, void** indices,
                              unsigned* seed) {
  int64_t* o = malloc(sizeof(int64_t) * (size_t)(rows + 1));
  int64_t* c = malloc(sizeof(int64_t) * (size_t)(rows * cols > 0 ? rows * cols : 1));
  int64_t entries = 0;
  o[0] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    *seed = *seed * 1103515245u + 12345u;
    const int empty = (*seed >> 16) % 9 == 0;
    for (int64_t j = 0; j < cols && !empty; ++j) {
      *seed = *seed * 1103515245u + 12345u;
      if ((int)((*seed >> 16) % 100) < percent) c[entries++] = j;
    }
    o[r + 1] = entries;
  }
  if (wide) {
    *offsets = o, *indices = c;
  } else {
    int32_t* o32 = malloc(sizeof(int32_t) * (size_t)(rows + 1));
    int32_t* c32 = malloc(sizeof(int32_t) * (size_t)(entries > 0 ? entries : 1));
    for (int64_t r = 0; r <= rows; ++r) o32[r] = (int32_t)o[r];
    for (int64_t p = 0; p < entries; ++p) c32[p] = (int32_t)c[p];
    free(o), free(c);
    *offsets = o32, *indices = c32;
  }
  return entries;
}
static int64_t at(const void* a, int wide, int64_t i) {
  return wide ? ((const int64_t*)a)[i] : (int64_t)((const int32_t*)a)[i];
}
static uint16_t to_bf16(float f) { /* exact for the small integers used here */
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return (uint16_t)(u >> 16);
}

/* pruned_linear (CSR i32 f32, D = relu(alpha*A·B + bias[n]), row-major) and block_residual (BSR 4×4 i64 bf16, C and D
 * column-major, D = alpha*A·B + beta*C), against a double reference. */
static void check_spmm(int bsr, int variant, int64_t m, int64_t n, int64_t k, int percent, int threads) {
  unsigned seed = (unsigned)(m * 131 + n * 17 + k * 3 + (unsigned)percent);
  const int br = bsr ? 4 : 1, bc = bsr ? 4 : 1;
  const int64_t brows = (m + br - 1) / br, bcols = (k + bc - 1) / bc;
  void *offsets, *indices;
  const int64_t entries = random_pattern(brows, bcols, percent, bsr, &offsets, &indices, &seed);
  float* values = random_matrix(entries * br * bc, &seed);
  uint16_t* values16 = malloc(sizeof(uint16_t) * (size_t)(entries * br * bc + 1));
  for (int64_t i = 0; i < entries * br * bc; ++i) values16[i] = to_bf16(values[i]);
  float* b = random_matrix(k * n, &seed);
  uint16_t* b16 = malloc(sizeof(uint16_t) * (size_t)(k * n + 1));
  for (int64_t i = 0; i < k * n; ++i) b16[i] = to_bf16(b[i]);
  float* bias = random_matrix(n, &seed);
  float* c = random_matrix(m * n, &seed);
  float* d = malloc(sizeof(float) * (size_t)(m * n + 1));
  for (int64_t i = 0; i < m * n; ++i) d[i] = NAN;
  tlib_spmm_args x;
  memset(&x, 0, sizeof x);
  x.a = (tlib_sparse){m, k, entries, offsets, indices, bsr ? (const void*)values16 : (const void*)values};
  x.n = n, x.threads = threads, x.alpha = 0.5f, x.beta = 2.0f;
  x.b = (tlib_tensor){bsr ? (const void*)b16 : (const void*)b, n, 1, 0};
  x.c = (tlib_tensor){c, 1, m, 0}; /* column-major, read by block_residual only */
  x.d = bsr ? (tlib_tensor){d, 1, m, 0} : (tlib_tensor){d, n, 1, 0};
  tlib_tensor inputs[1] = {{bias, 0, 1, 0}};
  x.inputs = bsr ? NULL : inputs;
  const int status = bsr ? tlib_block_residual_run_variant(variant, &x) : tlib_pruned_linear_run_variant(variant, &x);
  const char* name = bsr ? tlib_block_residual_variant_name(variant) : tlib_pruned_linear_variant_name(variant);
  if (status != TLIB_OK) {
    printf("FAIL %s %lldx%lldx%lld (%d%%) threads %d: status %d: %s\n", name, (long long)m, (long long)n, (long long)k,
           percent, threads, status, tlib_last_error());
    ++failures;
  } else {
    double* want = calloc((size_t)(m * n + 1), sizeof(double));
    for (int64_t r = 0; r < brows; ++r)
      for (int64_t p = at(offsets, bsr, r); p < at(offsets, bsr, r + 1); ++p)
        for (int i = 0; i < br && r * br + i < m; ++i)
          for (int q = 0; q < bc && at(indices, bsr, p) * bc + q < k; ++q)
            for (int64_t j = 0; j < n; ++j)
              want[(r * br + i) * n + j] +=
                  (double)values[(p * br + i) * bc + q] * (double)b[(at(indices, bsr, p) * bc + q) * n + j];
    int bad = 0;
    for (int64_t i = 0; i < m && !bad; ++i)
      for (int64_t j = 0; j < n && !bad; ++j) {
        double w = x.alpha * want[i * n + j];
        w = bsr ? w + x.beta * c[j * m + i] : (w + bias[j] > 0 ? w + bias[j] : 0);
        const float got = bsr ? d[j * m + i] : d[i * n + j];
        if (!(fabs(got - w) <= 1e-3 * (1 + fabs(w)))) {
          printf("FAIL %s %lldx%lldx%lld (%d%%) threads %d: d[%lld,%lld] = %g, expected %g\n", name, (long long)m,
                 (long long)n, (long long)k, percent, threads, (long long)i, (long long)j, got, w);
          bad = 1;
        }
      }
    failures += bad;
    free(want);
  }
  free(offsets), free(indices), free(values), free(values16), free(b), free(b16), free(bias), free(c), free(d);
}

/* masked_scores (SDDMM, CSR i32): out[p] = dot(A[i,:], B[j,:]) * s[p] + rowbias[i]. */
static void check_sddmm(int variant, int64_t m, int64_t n, int64_t k, int percent, int threads) {
  unsigned seed = (unsigned)(m * 7 + n * 131 + k + (unsigned)percent);
  void *offsets, *indices;
  const int64_t entries = random_pattern(m, n, percent, 0, &offsets, &indices, &seed);
  float* s = random_matrix(entries, &seed);
  float* a = random_matrix(m * k, &seed);
  float* b = random_matrix(n * k, &seed);
  float* rowbias = random_matrix(m, &seed);
  float* out = malloc(sizeof(float) * (size_t)(entries + 1));
  for (int64_t p = 0; p < entries; ++p) out[p] = NAN;
  tlib_sddmm_args x;
  memset(&x, 0, sizeof x);
  x.pattern = (tlib_sparse){m, n, entries, offsets, indices, s};
  x.k = k, x.threads = threads, x.alpha = 1.0f, x.out = out;
  x.a = (tlib_tensor){a, k, 1, 0};
  x.b = (tlib_tensor){b, k, 1, 0};
  tlib_tensor inputs[1] = {{rowbias, 1, 0, 0}};
  x.inputs = inputs;
  const int status = tlib_masked_scores_run_variant(variant, &x);
  if (status != TLIB_OK) {
    printf("FAIL %s %lldx%lldx%lld threads %d: status %d: %s\n", tlib_masked_scores_variant_name(variant), (long long)m,
           (long long)n, (long long)k, threads, status, tlib_last_error());
    ++failures;
  } else {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = at(offsets, 0, i); p < at(offsets, 0, i + 1); ++p) {
        double dot = 0;
        for (int64_t q = 0; q < k; ++q) dot += (double)a[i * k + q] * (double)b[at(indices, 0, p) * k + q];
        const double w = dot * s[p] + rowbias[i];
        if (!(fabs(out[p] - w) <= 1e-3 * (1 + fabs(w)))) {
          printf("FAIL %s %lldx%lldx%lld threads %d: out[%lld] = %g, expected %g\n",
                 tlib_masked_scores_variant_name(variant), (long long)m, (long long)n, (long long)k, threads,
                 (long long)p, out[p], w);
          ++failures;
          i = m;
          break;
        }
      }
  }
  free(offsets), free(indices), free(s), free(a), free(b), free(rowbias), free(out);
}

/* Broken patterns and operands are refused with a message naming them, and the output is left alone. */
static void check_sparse_errors(void) {
  int32_t offsets[4] = {0, 2, 1, 3}, indices[3] = {0, 1, 2};
  float values[3] = {1, 2, 3}, b[12] = {0}, d[12], out[3];
  for (int i = 0; i < 12; ++i) d[i] = 7;
  tlib_spmm_args x;
  memset(&x, 0, sizeof x);
  x.a = (tlib_sparse){3, 3, 3, offsets, indices, values};
  x.n = 4, x.alpha = 1;
  x.b = (tlib_tensor){b, 4, 1, 0};
  x.d = (tlib_tensor){d, 4, 1, 0};
  float bias[4] = {0};
  tlib_tensor inputs[1] = {{bias, 0, 1, 0}};
  x.inputs = inputs;
  const struct {
    const char* what;
    int32_t offsets[4], indices[3];
    const char* needle;
  } cases[] = {{"decreasing offsets", {0, 2, 1, 3}, {0, 1, 2}, "a.row_offsets[2] = 1"},
               {"offsets past the entries", {0, 1, 2, 4}, {0, 1, 2}, "a.row_offsets[3] = 4"},
               {"offsets not from 0", {1, 1, 2, 3}, {0, 1, 2}, "a.row_offsets[0] is 1"},
               {"a column out of range", {0, 1, 2, 3}, {0, 3, 2}, "a.col_indices[1] = 3 is outside 0..2"},
               {"a negative column", {0, 1, 2, 3}, {0, 1, -1}, "a.col_indices[2] = -1"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    memcpy(offsets, cases[i].offsets, sizeof offsets);
    memcpy(indices, cases[i].indices, sizeof indices);
    if (tlib_pruned_linear(&x) != TLIB_EINVAL || !strstr(tlib_last_error(), cases[i].needle) || d[0] != 7) {
      printf("FAIL spmm %s: %s\n", cases[i].what, tlib_last_error());
      ++failures;
    }
  }
  memcpy(offsets, (int32_t[]){0, 1, 2, 3}, sizeof offsets);
  memcpy(indices, (int32_t[]){0, 1, 2}, sizeof indices);
  x.b.rs = 3; /* shorter than N */
  if (tlib_pruned_linear(&x) != TLIB_EINVAL || !strstr(tlib_last_error(), "b is row-major")) {
    printf("FAIL spmm short b.rs: %s\n", tlib_last_error());
    ++failures;
  }
  x.b.rs = 4;
  x.inputs = NULL;
  if (tlib_pruned_linear(&x) != TLIB_EINVAL || !strstr(tlib_last_error(), "inputs is null")) {
    printf("FAIL spmm without bias: %s\n", tlib_last_error());
    ++failures;
  }
  x.inputs = inputs;
  x.a.values = NULL;
  if (tlib_pruned_linear(&x) != TLIB_EINVAL || !strstr(tlib_last_error(), "a.values is null")) {
    printf("FAIL spmm null values: %s\n", tlib_last_error());
    ++failures;
  }
  x.a.values = values;
  if (tlib_pruned_linear(&x) != TLIB_OK || d[0] != 0) { /* the same call, repaired, runs: relu(0 + 0) */
    printf("FAIL spmm repaired call: %s\n", tlib_last_error());
    ++failures;
  }
  tlib_sddmm_args y;
  memset(&y, 0, sizeof y);
  y.pattern = (tlib_sparse){3, 3, 3, offsets, indices, NULL};
  y.k = 4, y.alpha = 1, y.out = out;
  y.a = (tlib_tensor){b, 4, 1, 0};
  y.b = (tlib_tensor){b, 4, 1, 0};
  y.inputs = inputs;
  if (tlib_masked_scores(&y) != TLIB_EINVAL || !strstr(tlib_last_error(), "pattern.values is null")) {
    printf("FAIL sddmm without s: %s\n", tlib_last_error());
    ++failures;
  }
  y.pattern.values = values;
  y.out = NULL;
  if (tlib_masked_scores(&y) != TLIB_EINVAL || !strstr(tlib_last_error(), "out is null")) {
    printf("FAIL sddmm null out: %s\n", tlib_last_error());
    ++failures;
  }
}

/* Attention against a double reference: O = softmax(mod(scale·Q·Kᵀ))·V per (b, h, i), causal aligned bottom-right,
 * rows without a visible key zero (LSE −inf). capped_attention: f32, d 64, causal, LSE, mod = cap·tanh(s/cap);
 * decode_bf16: bf16, d 128 (V 96), no modifier. Layouts: BHSD, BSHD, or varlen (packed rows, offsets). Returns 0
 * when the variant needs an extension this CPU lacks (the call says so), 1 when checked. */
static float from_bf16_bits(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static int check_attention(int bf16, int variant, int64_t batch, int64_t heads, int64_t kv_heads, int64_t seq_q,
                           int64_t seq_kv, int layout, int threads) {
  const int64_t d = bf16 ? 128 : 64, dv = bf16 ? 96 : 64;
  const float cap = 3.0f;
  unsigned seed = (unsigned)(batch * 7 + heads * 131 + seq_q * 17 + seq_kv + (unsigned)layout);
  int64_t offsets_q[5] = {0}, offsets_kv[5] = {0};
  for (int64_t b = 0; b < batch; ++b) { /* varlen: lengths vary by item, one of them empty */
    offsets_q[b + 1] = offsets_q[b] + (layout == 2 ? (b == 1 ? 0 : seq_q - b) : seq_q);
    offsets_kv[b + 1] = offsets_kv[b] + (layout == 2 ? seq_kv - 3 * b : seq_kv);
  }
  const int64_t rows_q = offsets_q[batch], rows_kv = offsets_kv[batch];
  const int64_t nq = rows_q * heads * d, nk = rows_kv * kv_heads * d, nv = rows_kv * kv_heads * dv,
                no = rows_q * heads * dv;
  float *q = malloc(sizeof(float) * (size_t)(nq + 1)), *k = malloc(sizeof(float) * (size_t)(nk + 1)),
        *v = malloc(sizeof(float) * (size_t)(nv + 1)), *o = malloc(sizeof(float) * (size_t)(no + 1));
  uint16_t *q16 = malloc(2 * (size_t)(nq + 1)), *k16 = malloc(2 * (size_t)(nk + 1)),
           *v16 = malloc(2 * (size_t)(nv + 1)), *o16 = malloc(2 * (size_t)(no + 1));
  float* lse = malloc(sizeof(float) * (size_t)(rows_q * heads + 1));
  float* arrays[3] = {q, k, v};
  uint16_t* arrays16[3] = {q16, k16, v16};
  const int64_t sizes[3] = {nq, nk, nv};
  for (int a = 0; a < 3; ++a)
    for (int64_t i = 0; i < sizes[a]; ++i) {
      seed = seed * 1103515245u + 12345u;
      const float x = (float)((int)((seed >> 16) % 257) - 128) / 128.0f; /* exact in bf16 */
      arrays[a][i] = x;
      arrays16[a][i] = to_bf16(x);
    }
  for (int64_t i = 0; i < no; ++i) o[i] = NAN, o16[i] = 0x7fc0;
  for (int64_t i = 0; i < rows_q * heads; ++i) lse[i] = NAN;
  /* Strides [b, h, s, dim]: BHSD, BSHD, or varlen rows [total, heads, dim]. */
  const int bshd = layout != 0;
  tlib_attention_args x;
  memset(&x, 0, sizeof x);
  x.batch = batch, x.heads = heads, x.kv_heads = kv_heads, x.seq_q = seq_q, x.seq_kv = seq_kv, x.threads = threads;
  if (layout == 2) x.offsets_q = offsets_q, x.offsets_kv = offsets_kv;
#define STRIDES(H, S, D) {bshd ? (S) * (H) * (D) : (H) * (S) * (D), bshd ? (D) : (S) * (D), bshd ? (H) * (D) : (D), 1}
  x.q = (tlib_tensor4){bf16 ? (const void*)q16 : q, STRIDES(heads, seq_q, d)};
  x.k = (tlib_tensor4){bf16 ? (const void*)k16 : k, STRIDES(kv_heads, seq_kv, d)};
  x.v = (tlib_tensor4){bf16 ? (const void*)v16 : v, STRIDES(kv_heads, seq_kv, dv)};
  x.o = (tlib_tensor4){bf16 ? (const void*)o16 : o, STRIDES(heads, seq_q, dv)};
  x.lse = lse;
  x.lse_strides[0] = heads * seq_q, x.lse_strides[1] = layout == 2 ? rows_q : seq_q, x.lse_strides[2] = 1;
  const float scalars[1] = {cap};
  x.scalars = scalars;
  const int status = bf16 ? tlib_decode_bf16_run_variant(variant, &x) : tlib_capped_attention_run_variant(variant, &x);
  const char* name = bf16 ? tlib_decode_bf16_variant_name(variant) : tlib_capped_attention_variant_name(variant);
  int checked = 1;
  if (status == TLIB_ENOCPU) {
    checked = 0;
  } else if (status != TLIB_OK) {
    printf("FAIL %s %lldx%lld/%lldx%lld:%lld layout %d threads %d: status %d: %s\n", name, (long long)batch,
           (long long)heads, (long long)kv_heads, (long long)seq_q, (long long)seq_kv, layout, threads, status,
           tlib_last_error());
    ++failures;
  } else {
    double* p = malloc(sizeof(double) * (size_t)(seq_kv + 1));
    int bad = 0;
    const double scale = 1.0 / sqrt((double)d);
    for (int64_t b = 0; b < batch && !bad; ++b) {
      const int64_t sq = offsets_q[b + 1] - offsets_q[b], skv = offsets_kv[b + 1] - offsets_kv[b];
      for (int64_t h = 0; h < heads && !bad; ++h)
        for (int64_t i = 0; i < sq && !bad; ++i) {
          const int64_t g = h / (heads / kv_heads);
          /* element e of row r of head hh in a tensor of `rows` rows per item (BHSD) or packed */
#define AT(T, hh, r, e, D)                                            \
  (layout == 2 ? ((T##_first + (r)) * T##_heads + (hh)) * (D) + (e)   \
   : bshd      ? ((b * T##_len + (r)) * T##_heads + (hh)) * (D) + (e) \
               : ((b * T##_heads + (hh)) * T##_len + (r)) * (D) + (e))
          const int64_t q_first = offsets_q[b], q_heads = heads, q_len = seq_q;
          const int64_t k_first = offsets_kv[b], k_heads = kv_heads, k_len = seq_kv;
          const int64_t visible = !bf16 ? (i + skv - sq + 1 < 0     ? 0
                                           : i + skv - sq + 1 > skv ? skv
                                                                    : i + skv - sq + 1)
                                        : skv;
          double top = -INFINITY;
          for (int64_t j = 0; j < visible; ++j) {
            double dot = 0;
            for (int64_t e = 0; e < d; ++e) dot += (double)q[AT(q, h, i, e, d)] * (double)k[AT(k, g, j, e, d)];
            double sc = dot * scale;
            if (!bf16) sc = cap * tanh(sc / cap);
            p[j] = sc;
            if (sc > top) top = sc;
          }
          double total = 0;
          for (int64_t j = 0; j < visible; ++j) total += p[j] = exp(p[j] - top);
          for (int64_t e = 0; e < dv && !bad; ++e) {
            double want = 0;
            for (int64_t j = 0; j < visible; ++j) want += p[j] / total * (double)v[AT(k, g, j, e, dv)];
            const int64_t at = AT(q, h, i, e, dv);
            const double got = bf16 ? (double)from_bf16_bits(o16[at]) : (double)o[at];
            if (!(fabs(got - want) <= (bf16 ? 2e-2 : 1e-4))) {
              printf(
                  "FAIL %s %lldx%lld/%lldx%lld:%lld layout %d threads %d: o[b %lld, h %lld, i %lld, %lld] = %g, "
                  "expected %g\n",
                  name, (long long)batch, (long long)heads, (long long)kv_heads, (long long)seq_q, (long long)seq_kv,
                  layout, threads, (long long)b, (long long)h, (long long)i, (long long)e, got, want);
              bad = 1;
            }
          }
          if (!bf16 && !bad) {
            const double want = visible ? top + log(total) : -INFINITY;
            const float got = lse[layout == 2 ? h * rows_q + q_first + i : (b * heads + h) * seq_q + i];
            if (!(got == want || fabs(got - want) <= 1e-4)) {
              printf("FAIL %s layout %d: lse[b %lld, h %lld, i %lld] = %g, expected %g\n", name, layout, (long long)b,
                     (long long)h, (long long)i, got, want);
              bad = 1;
            }
          }
#undef AT
        }
    }
    failures += bad;
    free(p);
  }
#undef STRIDES
  free(q), free(k), free(v), free(o), free(q16), free(k16), free(v16), free(o16), free(lse);
  return checked;
}

/* Whether this CPU runs AVX-512 kernels: the driver's tier is avx512, or amx (AVX-512 with AMX tiles). */
static int avx512_here(const char* isa) { return strcmp(isa, "avx512") == 0 || strcmp(isa, "amx") == 0; }

int main(void) {
  int checked = 0, skipped = 0;
  const char* isa = tlib_isa();
  for (int kernel = 0; kernel < 3; ++kernel)
    for (int v = 0; v < count_fns[kernel](); ++v) {
      const char* name = name_fns[kernel](v);
      if (strstr(name, "_avx512_") && !avx512_here(isa)) {
        ++skipped; /* this CPU cannot run it; the dispatcher never picks it here */
        continue;
      }
      int64_t fm = 0, fn = 0, fk = 0;
      const char* fix = strstr(name, "_fix");
      if (fix) sscanf(fix, "_fix%lldx%lldx%lld", (long long*)&fm, (long long*)&fn, (long long*)&fk);
      for (int threads = 1; threads <= 2; ++threads) {
        if (fix) {
          check(kernel, v, fm, fn, fk, 1, threads);
          check(kernel, v, fm, fn, fk, 3, threads);
        } else {
          check(kernel, v, 37, 53, 29, 1, threads);
          check(kernel, v, 130, 77, 301, 2, threads);
          check(kernel, v, 1, 200, 64, 1, threads);
          check(kernel, v, 64, 64, 0, 1, threads);
          checked += 4;
        }
        checked += fix ? 2 : 0;
      }
    }
  /* int8: every variant that this CPU runs (those needing VNNI it lacks refuse with ENOCPU and are counted skipped). */
  for (int v = 0; v < tlib_qlinear_variant_count(); ++v)
    for (int threads = 1; threads <= 2; ++threads) {
      const int64_t shapes[][3] = {{32, 256, 512}, {37, 70, 301}, {1, 33, 5}};
      for (int s = 0; s < 3; ++s) {
        if (check_int8(v, shapes[s][0], shapes[s][1], shapes[s][2], threads))
          ++checked;
        else
          ++skipped;
      }
    }
  /* SpMM and SDDMM: every variant this CPU runs, on edges (partial blocks, empty rows, N = 1, no entries), on a B
   * large enough for column panels (300x700x200 at 30%), on a K longer than SDDMM's K panels (K = 300), on one and
   * two threads. */
  for (int bsr = 0; bsr < 2; ++bsr) {
    const int count = bsr ? tlib_block_residual_variant_count() : tlib_pruned_linear_variant_count();
    for (int v = 0; v < count; ++v) {
      const char* name = bsr ? tlib_block_residual_variant_name(v) : tlib_pruned_linear_variant_name(v);
      if (strstr(name, "_avx512_") && !avx512_here(isa)) {
        ++skipped;
        continue;
      }
      for (int threads = 1; threads <= 2; ++threads) {
        const int64_t shapes[][4] = {{37, 53, 29, 20}, {300, 700, 200, 30}, {66, 1, 70, 10}, {9, 17, 5, 0}};
        for (int s = 0; s < 4; ++s) {
          check_spmm(bsr, v, shapes[s][0], shapes[s][1], shapes[s][2], (int)shapes[s][3], threads);
          ++checked;
        }
      }
    }
  }
  for (int v = 0; v < tlib_masked_scores_variant_count(); ++v) {
    if (strstr(tlib_masked_scores_variant_name(v), "_avx512_") && !avx512_here(isa)) {
      ++skipped;
      continue;
    }
    for (int threads = 1; threads <= 2; ++threads) {
      const int64_t shapes[][4] = {{61, 45, 37, 25}, {200, 300, 64, 5}, {7, 3, 1, 50}, {5, 5, 8, 0}, {40, 60, 300, 20}};
      for (int s = 0; s < 5; ++s) {
        check_sddmm(v, shapes[s][0], shapes[s][1], shapes[s][2], (int)shapes[s][3], threads);
        ++checked;
      }
    }
  }
  check_sparse_errors();
  /* Attention: every variant on prefill, decoding (stacked GQA, keys split into chunks on two threads), BSHD and
   * varlen with an empty sequence, one and two threads. */
  for (int bf16 = 0; bf16 < 2; ++bf16) {
    const int count = bf16 ? tlib_decode_bf16_variant_count() : tlib_capped_attention_variant_count();
    for (int v = 0; v < count; ++v) {
      const char* name = bf16 ? tlib_decode_bf16_variant_name(v) : tlib_capped_attention_variant_name(v);
      if (strstr(name, "_avx512_") && !avx512_here(isa)) {
        ++skipped;
        continue;
      }
      for (int threads = 1; threads <= 2; ++threads) {
        const int64_t cases[][6] = {{2, 4, 2, 37, 50, 0},  {2, 4, 2, 37, 50, 1}, {3, 4, 2, 20, 40, 2},
                                    {1, 8, 2, 1, 1500, 0}, {2, 8, 2, 3, 700, 1}, {1, 4, 4, 1, 300, 2}};
        for (int c = 0; c < 6; ++c) {
          if (check_attention(bf16, v, cases[c][0], cases[c][1], cases[c][2], cases[c][3], cases[c][4],
                              (int)cases[c][5], threads))
            ++checked;
          else
            ++skipped;
        }
      }
    }
  }
  {
    tlib_attention_args bad;
    memset(&bad, 0, sizeof bad);
    float buffer[64] = {0};
    bad.batch = 1, bad.heads = 3, bad.kv_heads = 2, bad.seq_q = 1, bad.seq_kv = 1;
    const tlib_tensor4 t = {buffer, {64, 64, 64, 1}};
    bad.q = bad.k = bad.v = bad.o = t;
    if (tlib_capped_attention(&bad) != TLIB_EINVAL || !strstr(tlib_last_error(), "multiple of kv_heads")) {
      printf("FAIL attention heads: %s\n", tlib_last_error());
      ++failures;
    }
    bad.heads = 2;
    bad.k.strides[3] = 2;
    if (tlib_capped_attention(&bad) != TLIB_EINVAL || !strstr(tlib_last_error(), "k.strides[3]")) {
      printf("FAIL attention head-dimension stride: %s\n", tlib_last_error());
      ++failures;
    }
    bad.k.strides[3] = 1;
    const int64_t offsets[3] = {0, 2, 1};
    bad.batch = 2, bad.offsets_q = offsets, bad.offsets_kv = offsets;
    if (tlib_capped_attention(&bad) != TLIB_EINVAL || !strstr(tlib_last_error(), "offsets_q must not decrease")) {
      printf("FAIL attention offsets: %s\n", tlib_last_error());
      ++failures;
    }
  }
  if (tlib_pruned_linear_variant_for(300, 700, 200) < 0 || tlib_masked_scores_variant_for(10, 10, 10) < 0) {
    printf("FAIL no sparse variant for this CPU\n");
    ++failures;
  }
  /* The dispatcher: every kernel on a few shapes, and bad arguments refused with a message naming them. */
  for (int kernel = 0; kernel < 3; ++kernel) {
    const int64_t shapes[][3] = {{64, 64, 64}, {512, 512, 512}, {5, 3, 2}};
    for (int s = 0; s < 3; ++s) {
      const int v = kernel == 0   ? tlib_matmul_variant_for(shapes[s][0], shapes[s][1], shapes[s][2])
                    : kernel == 1 ? tlib_linear_relu_variant_for(shapes[s][0], shapes[s][1], shapes[s][2])
                                  : tlib_scaled_residual_variant_for(shapes[s][0], shapes[s][1], shapes[s][2]);
      if (v < 0) {
        printf("FAIL kernel %d: no variant for %lldx%lldx%lld\n", kernel, (long long)shapes[s][0],
               (long long)shapes[s][1], (long long)shapes[s][2]);
        ++failures;
        continue;
      }
      check(kernel, v, shapes[s][0], shapes[s][1], shapes[s][2], 1, 0);
      ++checked;
    }
  }
  tlib_gemm_args bad;
  memset(&bad, 0, sizeof bad);
  bad.m = 4, bad.n = 4, bad.k = 4, bad.batch = 1;
  float buffer[16] = {0};
  bad.a = (tlib_tensor){buffer, 4, 2, 0}; /* a row-major A with a column stride of 2 */
  bad.b = (tlib_tensor){buffer, 4, 1, 0};
  bad.d = (tlib_tensor){buffer, 4, 1, 0};
  if (tlib_matmul(&bad) != TLIB_EINVAL || !strstr(tlib_last_error(), "a is row-major")) {
    printf("FAIL bad strides: %s\n", tlib_last_error());
    ++failures;
  }
  bad.a.cs = 1;
  bad.m = -1;
  if (tlib_matmul(&bad) != TLIB_EINVAL || !strstr(tlib_last_error(), "must be >= 0")) {
    printf("FAIL negative m: %s\n", tlib_last_error());
    ++failures;
  }
  if (tlib_matmul(NULL) != TLIB_EINVAL || tlib_linear_relu_run_variant(99, &bad) != TLIB_EINVAL) {
    printf("FAIL null args / bad variant\n");
    ++failures;
  }
  bad.m = 4;
  bad.b = (tlib_tensor){buffer, 1, 4, 0}; /* linear_relu's B is column-major */
  bad.inputs = NULL;
  if (tlib_linear_relu(&bad) != TLIB_EINVAL || !strstr(tlib_last_error(), "inputs is null")) {
    printf("FAIL missing inputs: %s\n", tlib_last_error());
    ++failures;
  }
  printf("%d calls checked (%d variants this CPU cannot run skipped), %d failures, ISA %s\n", checked, skipped,
         failures, isa);
  return failures || checked < 20 ? 1 : 0;
}
