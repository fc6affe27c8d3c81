/* tessera's C API from C: GEMMs of several shapes, layouts, batches and epilogues against a reference computed here,
 * a compiled kernel run on other sizes, and bad input answered with a status and a message naming the argument. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tessera/tessera.h"

static float value(unsigned* seed) {
  *seed = *seed * 1103515245u + 12345u;
  return (float)((int)((*seed >> 16) % 7) - 3);
}

static unsigned byte(unsigned* seed) {
  *seed = *seed * 1103515245u + 12345u;
  return (*seed >> 16) & 255u;
}

static tessera_tensor matrix(void* data, int64_t rows, int64_t cols, int col_major, int64_t ld) {
  tessera_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = TESSERA_F32;
  t.rank = 2;
  t.shape[0] = rows, t.shape[1] = cols;
  t.strides[0] = col_major ? 1 : ld, t.strides[1] = col_major ? ld : 1;
  return t;
}

/* D = relu(alpha*A·B + bias[n]) (with_bias) or alpha*A·B + beta*C, A (m×k) and B (k×n) in the given layouts. */
static void check_gemm(tessera_runtime* rt, int64_t m, int64_t n, int64_t k, int a_col, int b_col, int with_bias) {
  unsigned seed = (unsigned)(m * 131 + n * 7 + k);
  const int64_t lda = (a_col ? m : k) + 3, ldb = (b_col ? k : n) + 1;
  float* a = malloc(sizeof(float) * (size_t)(lda * (a_col ? k : m) + 1));
  float* b = malloc(sizeof(float) * (size_t)(ldb * (b_col ? n : k) + 1));
  float* c = malloc(sizeof(float) * (size_t)(m * n + 1));
  float* d = malloc(sizeof(float) * (size_t)(m * n + 1));
  float* bias = malloc(sizeof(float) * (size_t)(n + 1));
  for (int64_t i = 0; i < lda * (a_col ? k : m); ++i) a[i] = value(&seed);
  for (int64_t i = 0; i < ldb * (b_col ? n : k); ++i) b[i] = value(&seed);
  for (int64_t i = 0; i < m * n; ++i) c[i] = value(&seed), d[i] = NAN;
  for (int64_t i = 0; i < n; ++i) bias[i] = value(&seed);
  tessera_gemm_args args;
  memset(&args, 0, sizeof args);
  args.a = matrix(a, m, k, a_col, lda);
  args.b = matrix(b, k, n, b_col, ldb);
  args.d = matrix(d, m, n, 0, n);
  args.alpha = 2.0f;
  tessera_named_tensor input;
  if (with_bias) {
    args.epilogue = "relu(alpha*acc + bias[n])";
    input = named_vector("bias", bias, n);
    args.inputs = &input;
    args.input_count = 1;
  } else {
    args.c = matrix(c, m, n, 0, n);
    args.beta = 0.5f;
  }
  const int status = tessera_gemm(rt, &args);
  CHECK(status == TESSERA_OK, "%lldx%lldx%lld: status %d: %s", (long long)m, (long long)n, (long long)k, status,
        tessera_last_error());
  for (int64_t i = 0; i < m && status == TESSERA_OK; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += (double)a[a_col ? p * lda + i : i * lda + p] * (double)b[b_col ? j * ldb + p : p * ldb + j];
      double want = with_bias ? fmax(0.0, 2.0 * acc + bias[j]) : 2.0 * acc + 0.5 * c[i * n + j];
      if (d[i * n + j] != (float)want) {
        CHECK(0, "%lldx%lldx%lld d[%lld,%lld] = %g, expected %g", (long long)m, (long long)n, (long long)k,
              (long long)i, (long long)j, d[i * n + j], want);
        i = m;
        break;
      }
    }
  free(a), free(b), free(c), free(d), free(bias);
}

/* int8: u8 A times i8 B, exact i32 sums rounded once to the f32 D, scaled per column by the epilogue. Returns 0 when
 * the host has no VNNI (reported), 1 when checked. */
static int check_int8_gemm(tessera_runtime* rt, int64_t m, int64_t n, int64_t k) {
  unsigned seed = (unsigned)(m + n + k);
  uint8_t* a = malloc((size_t)(m * k));
  int8_t* b = malloc((size_t)(k * n));
  float* d = malloc(sizeof(float) * (size_t)(m * n));
  float* scale = malloc(sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < m * k; ++i) a[i] = (uint8_t)byte(&seed);
  for (int64_t i = 0; i < k * n; ++i) b[i] = (int8_t)((int)byte(&seed) - 128);
  for (int64_t i = 0; i < n; ++i) scale[i] = (float)(i % 5 + 1);
  for (int64_t i = 0; i < m * n; ++i) d[i] = NAN;
  tessera_gemm_args args;
  memset(&args, 0, sizeof args);
  args.a = matrix(a, m, k, 0, k), args.a.dtype = TESSERA_U8;
  args.b = matrix(b, k, n, 0, n), args.b.dtype = TESSERA_I8;
  args.d = matrix(d, m, n, 0, n);
  args.alpha = 1.0f;
  args.epilogue = "scale[n] * acc";
  tessera_named_tensor input;
  input = named_vector("scale", scale, n);
  args.inputs = &input;
  args.input_count = 1;
  const int status = tessera_gemm(rt, &args);
  int checked = 1;
  if (status != TESSERA_OK && strstr(tessera_last_error(), "int8 GEMM needs")) {
    printf("int8 not checked: %s\n", tessera_last_error());
    checked = 0;
  } else {
    CHECK(status == TESSERA_OK, "int8 %lldx%lldx%lld: status %d: %s", (long long)m, (long long)n, (long long)k, status,
          tessera_last_error());
    for (int64_t i = 0; i < m && status == TESSERA_OK; ++i)
      for (int64_t j = 0; j < n; ++j) {
        long long sum = 0;
        for (int64_t p = 0; p < k; ++p) sum += (long long)a[i * k + p] * b[p * n + j];
        const float want = scale[j] * (float)sum; /* one rounding of the sum, one of the product: as the kernel */
        if (d[i * n + j] != want) {
          CHECK(0, "int8 d[%lld,%lld] = %g, expected %g", (long long)i, (long long)j, d[i * n + j], want);
          i = m;
          break;
        }
      }
  }
  free(a), free(b), free(d), free(scale);
  return checked;
}

int main(void) {
  tessera_runtime* rt = NULL;
  tessera_runtime_options options = {NULL, 2, 1};
  CHECK(tessera_runtime_create(&options, &rt) == TESSERA_OK && rt, "create: %s", tessera_last_error());
  CHECK(strlen(tessera_version()) > 0, "version");
  const int64_t shapes[][3] = {{1, 1, 1}, {37, 29, 41}, {64, 64, 64}, {130, 77, 301}, {8, 300, 200}};
  for (int s = 0; s < 5; ++s)
    for (int layouts = 0; layouts < 4; ++layouts)
      for (int bias = 0; bias < 2; ++bias)
        check_gemm(rt, shapes[s][0], shapes[s][1], shapes[s][2], layouts & 1, layouts >> 1, bias);
  for (int s = 0; s < 5; ++s)
    if (!check_int8_gemm(rt, shapes[s][0], shapes[s][1], shapes[s][2])) break;

  /* A compiled kernel runs again on new data; other sizes run unless it was specialised to this shape, which it
   * then refuses with a message. */
  float a[6 * 5], b[5 * 4], d[6 * 4];
  for (int i = 0; i < 30; ++i) a[i] = (float)(i % 3);
  for (int i = 0; i < 20; ++i) b[i] = (float)(i % 4);
  tessera_gemm_args args;
  memset(&args, 0, sizeof args);
  args.a = matrix(a, 6, 5, 0, 5), args.b = matrix(b, 5, 4, 0, 4), args.d = matrix(d, 6, 4, 0, 4);
  args.alpha = 1.0f;
  tessera_gemm_kernel* kernel = NULL;
  CHECK(tessera_gemm_compile(rt, &args, &kernel) == TESSERA_OK && kernel, "compile: %s", tessera_last_error());
  CHECK(strncmp(tessera_gemm_kernel_name(kernel), "gemm_f32", 8) == 0, "kernel name %s",
        tessera_gemm_kernel_name(kernel));
  for (int i = 0; i < 30; ++i) a[i] = (float)(i % 5);
  for (int i = 0; i < 24; ++i) d[i] = -1;
  int rows = 6;
  CHECK(tessera_gemm_kernel_run(kernel, &args) == TESSERA_OK, "kernel run: %s", tessera_last_error());
  args.a.shape[0] = 3, args.d.shape[0] = 3;
  const int other = tessera_gemm_kernel_run(kernel, &args);
  if (other == TESSERA_OK)
    rows = 3;
  else
    CHECK(other == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "specialised for 6x4x5"),
          "other size: status %d: %s", other, tessera_last_error());
  args.a.shape[0] = 6, args.d.shape[0] = 6;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < 4; ++j) {
      float want = 0;
      for (int p = 0; p < 5; ++p) want += a[i * 5 + p] * b[p * 4 + j];
      CHECK(d[i * 4 + j] == want, "kernel run d[%d,%d] = %g, expected %g", i, j, d[i * 4 + j], want);
    }
  tessera_gemm_kernel_destroy(kernel);

  /* Bad input: a status, a message naming the argument, d untouched. */
  for (int i = 0; i < 24; ++i) d[i] = -7;
  args.b.shape[0] = 4; /* b's rows no longer match a's columns */
  CHECK(tessera_gemm(rt, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "b: has 4 rows"),
        "mismatch: %s", tessera_last_error());
  CHECK(d[0] == -7 && d[23] == -7, "d written by a rejected call");
  args.b.shape[0] = 5;
  args.epilogue = "gelu(acc";
  CHECK(tessera_gemm(rt, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "column"), "epilogue: %s",
        tessera_last_error());
  args.epilogue = NULL;
  args.a.dtype = (tessera_dtype)9;
  CHECK(tessera_gemm(rt, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "a: dtype 9"), "dtype: %s",
        tessera_last_error());
  args.a.dtype = TESSERA_F32;
  args.a.rank = 7;
  CHECK(tessera_gemm(rt, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "a: rank"), "rank: %s",
        tessera_last_error());
  args.a.rank = 2;
  args.input_count = 2;
  CHECK(tessera_gemm(rt, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "inputs"), "inputs: %s",
        tessera_last_error());
  args.input_count = 0;
  CHECK(tessera_gemm(rt, NULL) == TESSERA_INVALID_ARGUMENT, "null args");
  CHECK(tessera_gemm(NULL, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "runtime"), "null rt");
  tessera_runtime_options bad = {"cpu:sse2", 0, 0};
  tessera_runtime* none = NULL;
  CHECK(tessera_runtime_create(&bad, &none) == TESSERA_INVALID_ARGUMENT && none == NULL, "bad target: %s",
        tessera_last_error());
  CHECK(tessera_gemm(rt, &args) == TESSERA_OK && strcmp(tessera_last_error(), "") == 0, "recovers: %s",
        tessera_last_error());
  tessera_runtime_destroy(rt);
  printf("C API: %d failures\n", failures);
  return failures ? 1 : 0;
}
