/* tessera's C API: a runtime that JIT-compiles, caches and runs GEMM kernels described by their parts, for C, Rust,
 * Julia and any language with a C FFI. Link the shared library (libtessera.so). No C++ exception crosses it: every
 * function returns a status, and tessera_last_error() holds the message of the last failure on the calling thread. */
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

typedef enum { TESSERA_F32 = 0, TESSERA_BF16 = 1, TESSERA_F16 = 2 } tessera_dtype;

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

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_H */
