/* The C API tests' check: prints the failure with its place and counts it (main returns failures != 0). */
#ifndef TESSERA_TESTS_C_API_CHECK_H
#define TESSERA_TESTS_C_API_CHECK_H

#include <stdio.h>

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

#endif
