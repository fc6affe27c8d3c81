// The Runtime's shared state: target, JIT session, kernel cache and worker pool (kept alive by its kernels).
#pragma once

#include "generator/gemm_abi.hpp"
#include "jit/kernel_cache.hpp"
#include "jit/orc_session.hpp"
#include "jit/thread_pool.hpp"
#include "tessera/tessera.hpp"

namespace tessera {

struct GemmKernel::Compiled {
  KernelSpec spec;
  GemmKernelFn fn = nullptr;
  double compile_ms = 0;
};

struct Runtime::Impl {
  explicit Impl(const RuntimeOptions& options);

  RuntimeOptions options;
  Target target;
  int threads;
  OrcSession orc;
  ThreadPool pool;
  KernelCache<GemmKernel::Compiled> cache;
};

}  // namespace tessera
