/* tessera's C API for attention, SpMM and SDDMM, from C: results against references computed here (grouped-query,
 * causal, BSHD strides, a score modifier with a tensor and a scalar, variable lengths with the log-sum-exp; CSR and
 * BSR SpMM with an epilogue, SDDMM scaled by the pattern's values, a reused plan), and bad input answered with a
 * status and a message naming the argument. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tessera/tessera.h"

static float uniform(unsigned* seed) {
  *seed = *seed * 1103515245u + 12345u;
  return (float)((*seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static int close_to(double got, double want) { return fabs(got - want) <= 2e-5 + 2e-5 * fabs(want); }

/* A rank-4 view [b, h, s, d] of BSHD memory (b, s, h, d), or a rank-3 varlen view [total, h, d]. */
static tessera_tensor bshd(float* data, int64_t b, int64_t h, int64_t s, int64_t d) {
  tessera_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data, t.dtype = TESSERA_F32, t.rank = 4;
  t.shape[0] = b, t.shape[1] = h, t.shape[2] = s, t.shape[3] = d;
  t.strides[0] = s * h * d, t.strides[1] = d, t.strides[2] = h * d, t.strides[3] = 1;
  return t;
}

static tessera_tensor packed(float* data, int64_t total, int64_t h, int64_t d) {
  tessera_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data, t.dtype = TESSERA_F32, t.rank = 3;
  t.shape[0] = total, t.shape[1] = h, t.shape[2] = d;
  t.strides[0] = h * d, t.strides[1] = d, t.strides[2] = 1;
  return t;
}

/* One query row of attention in double: scores over the visible keys, the modifier, softmax, P·V. Rows of q, k, v
 * at element offsets qo, ko (key j at ko + j * kstride), v likewise; returns the log-sum-exp. */
static double reference_row(const float* q, const float* k, const float* v, int64_t d, int64_t kstride, int64_t seq_q,
                            int64_t seq_kv, int64_t i, int causal, double scale, double slope, double cap,
                            double* out) {
  double* s = malloc(sizeof(double) * (size_t)(seq_kv + 1));
  double top = -INFINITY;
  for (int64_t j = 0; j < seq_kv; ++j) {
    double dot = 0;
    for (int64_t x = 0; x < d; ++x) dot += (double)q[x] * (double)k[j * kstride + x];
    double score = scale * dot - slope * (double)(i - j);
    if (cap > 0) score = cap * tanh(score / cap);
    if (causal && j > i + seq_kv - seq_q) score = -INFINITY;
    s[j] = score;
    if (score > top) top = score;
  }
  double sum = 0;
  for (int64_t j = 0; j < seq_kv; ++j) sum += s[j] == -INFINITY ? 0 : exp(s[j] - top);
  for (int64_t x = 0; x < d; ++x) out[x] = 0;
  for (int64_t j = 0; j < seq_kv; ++j) {
    const double p = s[j] == -INFINITY ? 0 : exp(s[j] - top) / sum;
    for (int64_t x = 0; x < d; ++x) out[x] += p * (double)v[j * kstride + x];
  }
  free(s);
  return top + log(sum);
}

/* Grouped-query causal attention over BSHD memory with ALiBi written as text (slope[h] a tensor, cap a scalar). */
static void check_attention(tessera_runtime* rt) {
  const int64_t B = 2, H = 4, KVH = 2, SQ = 5, SKV = 9, D = 16;
  unsigned seed = 7;
  float* q = malloc(sizeof(float) * (size_t)(B * SQ * H * D));
  float* k = malloc(sizeof(float) * (size_t)(B * SKV * KVH * D));
  float* v = malloc(sizeof(float) * (size_t)(B * SKV * KVH * D));
  float* o = malloc(sizeof(float) * (size_t)(B * SQ * H * D));
  float slope[4] = {0.5f, 0.25f, 0.125f, 0.0625f};
  for (int64_t i = 0; i < B * SQ * H * D; ++i) q[i] = uniform(&seed), o[i] = NAN;
  for (int64_t i = 0; i < B * SKV * KVH * D; ++i) k[i] = uniform(&seed), v[i] = uniform(&seed);
  tessera_attention_args args;
  memset(&args, 0, sizeof args);
  args.q = bshd(q, B, H, SQ, D), args.k = bshd(k, B, KVH, SKV, D), args.v = bshd(v, B, KVH, SKV, D);
  args.o = bshd(o, B, H, SQ, D);
  args.causal = 1;
  args.score_mod = "cap * tanh((s - slope[h] * (i - j)) / cap)";
  tessera_named_tensor tensor;
  tensor = named_vector("slope", slope, H);
  args.tensors = &tensor, args.tensor_count = 1;
  tessera_named_scalar cap = {"cap", 20.0f};
  args.scalars = &cap, args.scalar_count = 1;
  const int status = tessera_attention(rt, &args);
  CHECK(status == TESSERA_OK, "attention: status %d: %s", status, tessera_last_error());
  double want[16];
  int bad = 0;
  for (int64_t b = 0; b < B && status == TESSERA_OK; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < SQ; ++i) {
        const int64_t g = h / (H / KVH);
        /* The modifier applies to the scaled score; the reference folds the scale in first. */
        reference_row(q + ((b * SQ + i) * H + h) * D, k + (b * SKV * KVH + g) * D, v + (b * SKV * KVH + g) * D, D,
                      KVH * D, SQ, SKV, i, 1, 1.0 / sqrt((double)D), slope[h], 20.0, want);
        for (int64_t x = 0; x < D; ++x)
          if (!close_to(o[((b * SQ + i) * H + h) * D + x], want[x]) && bad++ < 3)
            CHECK(0, "attention o[%lld,%lld,%lld,%lld] = %g, expected %g", (long long)b, (long long)h, (long long)i,
                  (long long)x, o[((b * SQ + i) * H + h) * D + x], want[x]);
      }

  /* Bad input: heads not a multiple of kv heads; a modifier that reads a tensor not given. */
  args.q.shape[1] = 3;
  CHECK(tessera_attention(rt, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "heads"), "heads: %s",
        tessera_last_error());
  args.q.shape[1] = H;
  args.tensor_count = 0;
  CHECK(tessera_attention(rt, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "slope"),
        "missing tensor: %s", tessera_last_error());
  args.tensor_count = -1;
  CHECK(tessera_attention(rt, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "tensors_count"),
        "negative count: %s", tessera_last_error());
  free(q), free(k), free(v), free(o);
}

/* A varlen batch of two items (3 and 6 queries over 4 and 7 keys) with the log-sum-exp written. */
static void check_varlen(tessera_runtime* rt) {
  const int64_t H = 2, D = 8, TQ = 9, TKV = 11;
  const int64_t oq[3] = {0, 3, 9}, okv[3] = {0, 4, 11};
  unsigned seed = 11;
  float q[9 * 2 * 8], k[11 * 2 * 8], v[11 * 2 * 8], o[9 * 2 * 8], lse[2 * 9];
  for (int i = 0; i < TQ * H * D; ++i) q[i] = uniform(&seed), o[i] = NAN;
  for (int i = 0; i < TKV * H * D; ++i) k[i] = uniform(&seed), v[i] = uniform(&seed);
  tessera_attention_args args;
  memset(&args, 0, sizeof args);
  args.q = packed(q, TQ, H, D), args.k = packed(k, TKV, H, D), args.v = packed(v, TKV, H, D);
  args.o = packed(o, TQ, H, D);
  args.lse.data = lse, args.lse.dtype = TESSERA_F32, args.lse.rank = 2;
  args.lse.shape[0] = H, args.lse.shape[1] = TQ, args.lse.strides[0] = TQ, args.lse.strides[1] = 1;
  args.seq_offsets_q = oq, args.seq_offsets_kv = okv, args.batch = 2;
  args.scale = 0.3f;
  const int status = tessera_attention(rt, &args);
  CHECK(status == TESSERA_OK, "varlen: status %d: %s", status, tessera_last_error());
  double want[8];
  for (int64_t b = 0; b < 2 && status == TESSERA_OK; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < oq[b + 1] - oq[b]; ++i) {
        const int64_t row = oq[b] + i;
        const double l = reference_row(q + (row * H + h) * D, k + (okv[b] * H + h) * D, v + (okv[b] * H + h) * D, D,
                                       H * D, oq[b + 1] - oq[b], okv[b + 1] - okv[b], i, 0, 0.3, 0, 0, want);
        CHECK(close_to(lse[h * TQ + row], l), "lse[%lld,%lld] = %g, expected %g", (long long)h, (long long)row,
              lse[h * TQ + row], l);
        for (int64_t x = 0; x < D; ++x)
          CHECK(close_to(o[(row * H + h) * D + x], want[x]), "varlen o[%lld,%lld,%lld] = %g, expected %g",
                (long long)row, (long long)h, (long long)x, o[(row * H + h) * D + x], want[x]);
      }
  args.seq_offsets_kv = NULL;
  CHECK(tessera_attention(rt, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "seq_offsets"),
        "one offsets array: %s", tessera_last_error());
}

/* A random M×K pattern (density about 1/4, some rows empty) in CSR with int32 indices. */
typedef struct {
  int64_t rows, cols, nnz;
  int32_t* offsets;
  int32_t* indices;
  float* values;
} csr;

static csr random_csr(int64_t rows, int64_t cols, unsigned seed) {
  csr m = {rows,
           cols,
           0,
           malloc(sizeof(int32_t) * (size_t)(rows + 1)),
           malloc(sizeof(int32_t) * (size_t)(rows * cols)),
           malloc(sizeof(float) * (size_t)(rows * cols))};
  m.offsets[0] = 0;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j)
      if (i % 5 != 3 && uniform(&seed) > 0.5f) m.indices[m.nnz] = (int32_t)j, m.values[m.nnz++] = uniform(&seed);
    m.offsets[i + 1] = (int32_t)m.nnz;
  }
  return m;
}

static tessera_sparse_matrix view(const csr* m) {
  tessera_sparse_matrix s;
  memset(&s, 0, sizeof s);
  s.rows = m->rows, s.cols = m->cols, s.entries = m->nnz;
  s.row_offsets = m->offsets, s.col_indices = m->indices, s.values = m->values;
  s.index_bits = 32, s.dtype = TESSERA_F32;
  return s;
}

static tessera_tensor matrix(float* data, int64_t rows, int64_t cols) {
  tessera_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data, t.dtype = TESSERA_F32, t.rank = 2;
  t.shape[0] = rows, t.shape[1] = cols, t.strides[0] = cols, t.strides[1] = 1;
  return t;
}

/* D = relu(A·B + bias[n]) with A CSR 37×29, B 29×13, through a plan made once and used twice; then a changed
 * pattern with the same plan is refused and D is left as it was. */
static void check_spmm(tessera_runtime* rt) {
  const int64_t M = 37, K = 29, N = 13;
  csr a = random_csr(M, K, 3);
  unsigned seed = 5;
  float b[29 * 13], d[37 * 13], bias[13];
  for (int i = 0; i < K * N; ++i) b[i] = uniform(&seed);
  for (int i = 0; i < N; ++i) bias[i] = uniform(&seed);
  tessera_sparse_matrix sa = view(&a);
  tessera_sparse_plan* plan = NULL;
  CHECK(tessera_sparse_plan_create(rt, &sa, 0, &plan) == TESSERA_OK && plan, "plan: %s", tessera_last_error());
  tessera_spmm_args args;
  memset(&args, 0, sizeof args);
  args.a = sa, args.b = matrix(b, K, N), args.d = matrix(d, M, N);
  args.alpha = 1.0f;
  args.epilogue = "relu(acc + bias[n])";
  tessera_named_tensor input;
  input = named_vector("bias", bias, N);
  args.inputs = &input, args.input_count = 1;
  args.plan = plan;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < M * N; ++i) d[i] = NAN;
    const int status = tessera_spmm(rt, &args);
    CHECK(status == TESSERA_OK, "spmm: status %d: %s", status, tessera_last_error());
    int bad = 0;
    for (int64_t i = 0; i < M && status == TESSERA_OK; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int32_t p = a.offsets[i]; p < a.offsets[i + 1]; ++p)
          acc += (double)a.values[p] * (double)b[a.indices[p] * N + j];
        const double want = fmax(0.0, acc + bias[j]);
        if (!close_to(d[i * N + j], want) && bad++ < 3)
          CHECK(0, "spmm d[%lld,%lld] = %g, expected %g", (long long)i, (long long)j, d[i * N + j], want);
      }
  }
  /* The pattern changed under its plan: refused, D untouched. */
  const int32_t first = a.indices[0];
  a.indices[0] = (int32_t)(first == 0 ? 1 : 0);
  if (a.offsets[1] > 1 && a.indices[1] <= a.indices[0]) a.indices[0] = first; /* keep the row sorted */
  if (a.indices[0] != first) {
    for (int i = 0; i < M * N; ++i) d[i] = -5;
    CHECK(tessera_spmm(rt, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "plan"),
          "changed pattern: %s", tessera_last_error());
    CHECK(d[0] == -5 && d[M * N - 1] == -5, "d written by a refused call");
    a.indices[0] = first;
  }
  tessera_sparse_plan_destroy(plan);
  /* A malformed pattern is named: columns out of order in a row. */
  int64_t row = 0;
  while (a.offsets[row + 1] - a.offsets[row] < 2) ++row;
  const int32_t p = a.offsets[row];
  int32_t swap = a.indices[p];
  a.indices[p] = a.indices[p + 1], a.indices[p + 1] = swap;
  args.plan = NULL;
  CHECK(tessera_spmm(rt, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "col_indices"),
        "unsorted: %s", tessera_last_error());
  plan = NULL;
  CHECK(tessera_sparse_plan_create(rt, &sa, 0, &plan) == TESSERA_INVALID_ARGUMENT && plan == NULL,
        "plan of a malformed pattern: %s", tessera_last_error());
  swap = a.indices[p];
  a.indices[p] = a.indices[p + 1], a.indices[p + 1] = swap;
  args.a.block_rows = -2;
  CHECK(tessera_spmm(rt, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "block_rows"),
        "negative block: %s", tessera_last_error());
  args.a.block_rows = 0;
  args.a.dtype = (tessera_dtype)5;
  CHECK(tessera_spmm(rt, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "a.dtype"),
        "sparse dtype: %s", tessera_last_error());
  free(a.offsets), free(a.indices), free(a.values);
}

/* BSR with 2×2 blocks: D = A·B, the zeros stored inside blocks included. */
static void check_bsr(tessera_runtime* rt) {
  /* 4×6 in 2×2 blocks: block row 0 has block columns 0 and 2, block row 1 has block column 1. */
  const int32_t offsets[3] = {0, 2, 3}, indices[3] = {0, 2, 1};
  float values[12], b[6 * 5], d[4 * 5], dense[4 * 6];
  unsigned seed = 9;
  for (int i = 0; i < 12; ++i) values[i] = uniform(&seed);
  for (int i = 0; i < 30; ++i) b[i] = uniform(&seed);
  memset(dense, 0, sizeof dense);
  for (int br = 0; br < 2; ++br)
    for (int p = offsets[br]; p < offsets[br + 1]; ++p)
      for (int r = 0; r < 2; ++r)
        for (int c = 0; c < 2; ++c) dense[(br * 2 + r) * 6 + indices[p] * 2 + c] = values[p * 4 + r * 2 + c];
  tessera_spmm_args args;
  memset(&args, 0, sizeof args);
  args.a.rows = 4, args.a.cols = 6, args.a.block_rows = 2, args.a.block_cols = 2, args.a.entries = 3;
  args.a.row_offsets = offsets, args.a.col_indices = indices, args.a.values = values;
  args.a.index_bits = 32, args.a.dtype = TESSERA_F32;
  args.b = matrix(b, 6, 5), args.d = matrix(d, 4, 5);
  args.alpha = 1.0f;
  const int status = tessera_spmm(rt, &args);
  CHECK(status == TESSERA_OK, "bsr spmm: status %d: %s", status, tessera_last_error());
  for (int i = 0; i < 4 && status == TESSERA_OK; ++i)
    for (int j = 0; j < 5; ++j) {
      double want = 0;
      for (int x = 0; x < 6; ++x) want += (double)dense[i * 6 + x] * (double)b[x * 5 + j];
      CHECK(close_to(d[i * 5 + j], want), "bsr d[%d,%d] = %g, expected %g", i, j, d[i * 5 + j], want);
    }
}

/* out[p] = (A[i,:]·B[j,:]) * s over a CSR pattern. */
static void check_sddmm(tessera_runtime* rt) {
  const int64_t M = 23, N = 31, K = 20;
  csr pattern = random_csr(M, N, 17);
  unsigned seed = 19;
  float a[23 * 20], b[31 * 20];
  for (int i = 0; i < M * K; ++i) a[i] = uniform(&seed);
  for (int i = 0; i < N * K; ++i) b[i] = uniform(&seed);
  float* out = malloc(sizeof(float) * (size_t)(pattern.nnz + 1));
  tessera_sddmm_args args;
  memset(&args, 0, sizeof args);
  args.pattern = view(&pattern);
  args.a = matrix(a, M, K), args.b = matrix(b, N, K);
  memset(&args.out, 0, sizeof args.out);
  args.out.data = out, args.out.dtype = TESSERA_F32, args.out.rank = 1;
  args.out.shape[0] = pattern.nnz, args.out.strides[0] = 1;
  args.alpha = 1.0f;
  args.epilogue = "acc * s";
  const int status = tessera_sddmm(rt, &args);
  CHECK(status == TESSERA_OK, "sddmm: status %d: %s", status, tessera_last_error());
  int bad = 0;
  for (int64_t i = 0; i < M && status == TESSERA_OK; ++i)
    for (int32_t p = pattern.offsets[i]; p < pattern.offsets[i + 1]; ++p) {
      double dot = 0;
      for (int64_t x = 0; x < K; ++x) dot += (double)a[i * K + x] * (double)b[pattern.indices[p] * K + x];
      const double want = dot * pattern.values[p];
      if (!close_to(out[p], want) && bad++ < 3) CHECK(0, "sddmm out[%d] = %g, expected %g", p, out[p], want);
    }
  /* A pattern without values, its epilogue not reading s. */
  args.pattern.values = NULL;
  args.epilogue = "alpha * acc";
  args.alpha = 0.5f;
  CHECK(tessera_sddmm(rt, &args) == TESSERA_OK, "sddmm without values: %s", tessera_last_error());
  for (int64_t i = 0, bad2 = 0; i < M; ++i)
    for (int32_t p = pattern.offsets[i]; p < pattern.offsets[i + 1]; ++p) {
      double dot = 0;
      for (int64_t x = 0; x < K; ++x) dot += (double)a[i * K + x] * (double)b[pattern.indices[p] * K + x];
      if (!close_to(out[p], 0.5 * dot) && bad2++ < 3) CHECK(0, "sddmm out[%d] = %g, expected %g", p, out[p], 0.5 * dot);
    }
  args.epilogue = "acc * s";
  CHECK(tessera_sddmm(rt, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "values"),
        "s without values: %s", tessera_last_error());
  args.pattern.values = pattern.values;
  args.epilogue = "acc * bias[m]";
  CHECK(tessera_sddmm(rt, &args) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "bias"),
        "missing input: %s", tessera_last_error());
  free(out), free(pattern.offsets), free(pattern.indices), free(pattern.values);
}

int main(void) {
  tessera_runtime* rt = NULL;
  tessera_runtime_options options = {NULL, 2, 1};
  CHECK(tessera_runtime_create(&options, &rt) == TESSERA_OK && rt, "create: %s", tessera_last_error());
  check_attention(rt);
  check_varlen(rt);
  check_spmm(rt);
  check_bsr(rt);
  check_sddmm(rt);
  CHECK(tessera_attention(NULL, NULL) == TESSERA_INVALID_ARGUMENT, "null runtime");
  CHECK(tessera_spmm(rt, NULL) == TESSERA_INVALID_ARGUMENT && strstr(tessera_last_error(), "args"), "null args");
  CHECK(tessera_sparse_plan_create(rt, NULL, 0, NULL) == TESSERA_INVALID_ARGUMENT, "null plan");
  tessera_runtime_destroy(rt);
  printf("C API (attention, sparse): %d failures\n", failures);
  return failures ? 1 : 0;
}
