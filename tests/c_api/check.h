/* The C API tests' check: prints the failure with its place and counts it (main returns failures != 0). */
#ifndef TESSERA_TESTS_C_API_CHECK_H
#define TESSERA_TESTS_C_API_CHECK_H

#include <stdio.h>
#include <string.h>

#include "tessera/tessera.h"

static int failures = 0;
#define CHECK(cond, ...)                          \
  do {                                            \
    if (!(cond)) {                                \
      printf("FAIL %s:%d: ", __FILE__, __LINE__); \
      printf(__VA_ARGS__);                        \
      printf("\n");                               \
      ++failures;                                 \
    }                                             \
  } while (0)

/* A named f32 vector, `name`[n] or [m] of an epilogue or score modifier, over `length` contiguous elements. */
static inline tessera_named_tensor named_vector(const char* name, float* data, int64_t length) {
  tessera_named_tensor t;
  memset(&t, 0, sizeof t);
  t.name = name;
  t.tensor.data = data, t.tensor.dtype = TESSERA_F32, t.tensor.rank = 1;
  t.tensor.shape[0] = length, t.tensor.strides[0] = 1;
  return t;
}

#endif
