/* tessera's C API: a runtime that JIT-compiles, caches and runs GEMM, fused attention and sparse (SpMM, SDDMM)
 * kernels described by their parts, for C, Rust, Julia and any language with a C FFI. Link the shared library
 * (libtessera.so). No C++ exception crosses it: every function returns a status, and tessera_last_error() holds the
 * message of the last failure on the calling thread. */
#ifndef TESSERA_H
#define TESSERA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  TESSERA_OK = 0,
  TESSERA_INVALID_ARGUMENT = 1, /* the message names the argument and the rule */
  TESSERA_UNAVAILABLE = 2,      /* the target cannot run here (an ISA, a GPU) or a resource is missing */
  TESSERA_COMPILE_ERROR = 3,    /* a bug in tessera: the message holds the compiler's log */
  TESSERA_OUT_OF_MEMORY = 4,
  TESSERA_INTERNAL = 5
};

/* TESSERA_U8 and TESSERA_I8: the A and B of an int8 GEMM (u8 A times i8 B, summed exactly in i32; D f32). */
typedef enum { TESSERA_F32 = 0, TESSERA_BF16 = 1, TESSERA_F16 = 2, TESSERA_U8 = 3, TESSERA_I8 = 4 } tessera_dtype;

/* A tensor in host memory: element strides, outermost first. rank 2 ([rows, cols]) or 3 ([batch, rows, cols]) for
 * matrices, 1 for vectors such as bias[n]. */
#define TESSERA_MAX_RANK 4
typedef struct tessera_tensor {
  void* data;
  tessera_dtype dtype;
  int rank;
  int64_t shape[TESSERA_MAX_RANK];
  int64_t strides[TESSERA_MAX_RANK];
} tessera_tensor;

typedef struct tessera_named_tensor {
  const char* name; /* as the epilogue names it: "bias" for bias[n] */
  tessera_tensor tensor;
} tessera_named_tensor;

/* D[b] = epilogue(A[b]·B[b], C[b], inputs...). c.data NULL: no C. epilogue NULL: "alpha*acc + beta*c". */
typedef struct tessera_gemm_args {
  tessera_tensor a, b, c, d;
  float alpha, beta;
  const char* epilogue;
  const tessera_named_tensor* inputs;
  int input_count;
  int threads; /* 0: every thread of the runtime */
} tessera_gemm_args;

/* O = softmax(score_mod(scale·Q·Kᵀ))·V per batch item and head (FlashAttention-2's forward pass). q, k, v, o are
 * [batch, heads, seq, head_dim] with any strides (BSHD memory is BHSD with other strides); k and v may have fewer
 * heads than q (grouped-query attention: heads a multiple of kv heads). Variable lengths: seq_offsets_q and
 * seq_offsets_kv hold batch + 1 cumulative offsets and q, k, v, o are packed [total, heads, head_dim]. */
typedef struct tessera_named_scalar {
  const char* name;
  float value;
} tessera_named_scalar;
typedef struct tessera_attention_args {
  tessera_tensor q, k, v, o;
  tessera_tensor lse; /* data NULL: not written; else f32 [batch, heads, seq_q] (varlen: [heads, total_q]) */
  int causal;         /* nonzero: key j is visible to query i when j <= i + seq_kv - seq_q (bottom-right aligned) */
  float scale;        /* 0: 1/sqrt(head_dim) */
  const int64_t* seq_offsets_q;  /* NULL: every item has the tensors' sequence lengths */
  const int64_t* seq_offsets_kv; /* with seq_offsets_q */
  int64_t batch;                 /* items of a varlen batch (the offsets hold batch + 1 values) */
  const char* score_mod;         /* NULL: none; text over s, i, j, h, b, scalars and tensors, e.g. "30*tanh(s/30)" */
  const tessera_named_tensor* tensors; /* f32 tensors score_mod reads */
  int tensor_count;
  const tessera_named_scalar* scalars; /* scalars score_mod reads */
  int scalar_count;
  int threads;
} tessera_attention_args;
/* A sparse matrix in CSR (block_rows = block_cols = 1) or BSR (blocks row-major inside): row_offsets holds
 * rows/block_rows + 1 offsets, col_indices and values one per stored entry (BSR: block and block_rows·block_cols
 * values). Indices are int32 (index_bits 32) or int64. */
typedef struct tessera_sparse_matrix {
  int64_t rows, cols;
  int block_rows, block_cols; /* 0 or 1: CSR */
  int64_t entries;            /* non-zeros (CSR) or blocks (BSR) */
  const void* row_offsets;
  const void* col_indices;
  const void* values; /* may be NULL for an SDDMM pattern whose epilogue does not read s */
  int index_bits;
  tessera_dtype dtype;
} tessera_sparse_matrix;
/* The inspector's plan of one pattern (its checked structure, statistics and a load-balanced split of the rows),
 * made once and passed with every call on that pattern; a call with a changed pattern is refused. */
typedef struct tessera_sparse_plan tessera_sparse_plan;
/* D = epilogue(A·B, C, inputs...) with A sparse M×K and B dense K×N; the epilogue as for GEMM. */
typedef struct tessera_spmm_args {
  tessera_sparse_matrix a;
  tessera_tensor b, c, d;
  float alpha, beta;
  const char* epilogue;
  const tessera_named_tensor* inputs;
  int input_count;
  const tessera_sparse_plan* plan; /* NULL: inspected on this call */
  int threads;
} tessera_spmm_args;
/* out[p] = epilogue(A[i,:]·B[j,:]) for each stored entry p = (i, j) of the pattern, in its order; A is M×K, B is
 * N×K; the epilogue also sees the pattern's value as s ("acc * s"). */
typedef struct tessera_sddmm_args {
  tessera_sparse_matrix pattern;
  tessera_tensor a, b, out;
  float alpha;
  const char* epilogue; /* NULL: "acc" */
  const tessera_named_tensor* inputs;
  int input_count;
  const tessera_sparse_plan* plan;
  int threads;
} tessera_sddmm_args;
typedef struct tessera_runtime_options {
  const char* target; /* NULL or "cpu": the host's best ISA; "cpu:avx512", "cpu:avx2" */
  int threads;        /* 0: one per hardware thread */
  int disk_cache;     /* nonzero: keep compiled kernels on disk ($TESSERA_CACHE_DIR) */
} tessera_runtime_options;

typedef struct tessera_runtime tessera_runtime;
typedef struct tessera_gemm_kernel tessera_gemm_kernel;

const char* tessera_version(void);
/* The message of the last failure on this thread ("" after a success). */
const char* tessera_last_error(void);

/* options NULL: the defaults (host ISA, every thread, disk cache on). */
int tessera_runtime_create(const tessera_runtime_options* options, tessera_runtime** runtime);
void tessera_runtime_destroy(tessera_runtime* runtime);

/* Validates, compiles (or finds in the cache) and runs. Thread-safe. */
int tessera_gemm(tessera_runtime* runtime, const tessera_gemm_args* args);

/* A kernel for the signature and shape args describe, to run again on arguments of that signature: any sizes, unless
 * it was specialised to this shape (small shapes), when other sizes are refused with TESSERA_INVALID_ARGUMENT. */
int tessera_gemm_compile(tessera_runtime* runtime, const tessera_gemm_args* args, tessera_gemm_kernel** kernel);
int tessera_gemm_kernel_run(const tessera_gemm_kernel* kernel, const tessera_gemm_args* args);
const char* tessera_gemm_kernel_name(const tessera_gemm_kernel* kernel);
void tessera_gemm_kernel_destroy(tessera_gemm_kernel* kernel);
/* Validates, compiles (or finds in the cache) and runs. Thread-safe. */
int tessera_attention(tessera_runtime* runtime, const tessera_attention_args* args);
/* Checks the pattern's structure (offsets, indices in range, sorted and distinct per row) and studies it for
 * `threads` threads (0: the runtime's). */
int tessera_sparse_plan_create(tessera_runtime* runtime, const tessera_sparse_matrix* matrix, int threads,
                               tessera_sparse_plan** plan);
void tessera_sparse_plan_destroy(tessera_sparse_plan* plan);
int tessera_spmm(tessera_runtime* runtime, const tessera_spmm_args* args);
int tessera_sddmm(tessera_runtime* runtime, const tessera_sddmm_args* args);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_H */
