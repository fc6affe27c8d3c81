// tessera's C API (tessera/tessera.h) over the C++ Runtime: every exception becomes a status and a per-thread message.
#include "tessera/tessera.h"

#include <exception>
#include <memory>
#include <new>
#include <string>

#include "tessera/tessera.hpp"

struct tessera_runtime {
  std::unique_ptr<tessera::Runtime> runtime;
};

struct tessera_gemm_kernel {
  tessera::GemmKernel kernel;
  std::string name;
};

namespace {

thread_local std::string last_error;

// Runs body, turning whatever it throws into a status and a message.
template <class Body>
int guarded(Body&& body) {
  try {
    body();
    last_error.clear();
    return TESSERA_OK;
  } catch (const tessera::InvalidArgument& e) {
    last_error = e.what();
    return TESSERA_INVALID_ARGUMENT;
  } catch (const tessera::EpilogueError& e) {
    last_error = std::string("epilogue: ") + e.what();
    return TESSERA_INVALID_ARGUMENT;
  } catch (const tessera::ConfigError& e) {
    last_error = e.what();
    return TESSERA_INVALID_ARGUMENT;
  } catch (const tessera::Unavailable& e) {
    last_error = e.what();
    return TESSERA_UNAVAILABLE;
  } catch (const tessera::CompileError& e) {
    last_error = e.what();
    return TESSERA_COMPILE_ERROR;
  } catch (const tessera::Error& e) {
    last_error = e.what();
    return TESSERA_INVALID_ARGUMENT;
  } catch (const std::bad_alloc&) {
    last_error = "out of memory";
    return TESSERA_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    last_error = std::string("internal error: ") + e.what();
    return TESSERA_INTERNAL;
  } catch (...) {
    last_error = "internal error";
    return TESSERA_INTERNAL;
  }
}

tessera::Tensor tensor(const tessera_tensor& t, const std::string& name) {
  tessera::Tensor out;
  if (!t.data && t.rank == 0) return out;  // absent
  if (t.rank < 1 || t.rank > TESSERA_MAX_RANK)
    throw tessera::InvalidArgument(
        name, "rank must be 1 to " + std::to_string(TESSERA_MAX_RANK) + ", got " + std::to_string(t.rank));
  switch (t.dtype) {
    case TESSERA_F32:
      out.dtype = tessera::DType::f32;
      break;
    case TESSERA_BF16:
      out.dtype = tessera::DType::bf16;
      break;
    case TESSERA_F16:
      out.dtype = tessera::DType::f16;
      break;
    default:
      throw tessera::InvalidArgument(name,
                                     "dtype " + std::to_string(static_cast<int>(t.dtype)) + " is not a tessera_dtype");
  }
  out.data = t.data;
  out.shape.assign(t.shape, t.shape + t.rank);
  out.strides.assign(t.strides, t.strides + t.rank);
  return out;
}

tessera::GemmArgs gemm_args(const tessera_gemm_args* a) {
  if (!a) throw tessera::InvalidArgument("args", "is null");
  tessera::GemmArgs g;
  g.a = tensor(a->a, "a");
  g.b = tensor(a->b, "b");
  g.c = tensor(a->c, "c");
  g.d = tensor(a->d, "d");
  g.alpha = a->alpha;
  g.beta = a->beta;
  g.threads = a->threads;
  if (a->epilogue) g.set_epilogue(a->epilogue);
  if (a->input_count < 0) throw tessera::InvalidArgument("input_count", "must be >= 0");
  if (a->input_count > 0 && !a->inputs) throw tessera::InvalidArgument("inputs", "is null but input_count > 0");
  for (int i = 0; i < a->input_count; ++i) {
    const tessera_named_tensor& in = a->inputs[i];
    if (!in.name) throw tessera::InvalidArgument("inputs[" + std::to_string(i) + "].name", "is null");
    if (!g.inputs.emplace(in.name, tensor(in.tensor, std::string("inputs.") + in.name)).second)
      throw tessera::InvalidArgument(std::string("inputs.") + in.name, "is given twice");
  }
  return g;
}

}  // namespace

extern "C" {

const char* tessera_version(void) { return TESSERA_VERSION; }
const char* tessera_last_error(void) { return last_error.c_str(); }

int tessera_runtime_create(const tessera_runtime_options* options, tessera_runtime** runtime) {
  return guarded([&] {
    if (!runtime) throw tessera::InvalidArgument("runtime", "is null");
    *runtime = nullptr;
    tessera::RuntimeOptions o;
    if (options) {
      if (options->target) o.target = options->target;
      o.threads = options->threads;
      o.disk_cache = options->disk_cache != 0;
    }
    auto r = std::make_unique<tessera_runtime>();
    r->runtime = std::make_unique<tessera::Runtime>(o);
    *runtime = r.release();
  });
}

void tessera_runtime_destroy(tessera_runtime* runtime) { delete runtime; }

int tessera_gemm(tessera_runtime* runtime, const tessera_gemm_args* args) {
  return guarded([&] {
    if (!runtime) throw tessera::InvalidArgument("runtime", "is null");
    runtime->runtime->gemm(gemm_args(args));
  });
}

int tessera_gemm_compile(tessera_runtime* runtime, const tessera_gemm_args* args, tessera_gemm_kernel** kernel) {
  return guarded([&] {
    if (!runtime) throw tessera::InvalidArgument("runtime", "is null");
    if (!kernel) throw tessera::InvalidArgument("kernel", "is null");
    *kernel = nullptr;
    const tessera::GemmKernel k = runtime->runtime->compile(runtime->runtime->describe(gemm_args(args)));
    *kernel = new tessera_gemm_kernel{k, k.name()};
  });
}

int tessera_gemm_kernel_run(const tessera_gemm_kernel* kernel, const tessera_gemm_args* args) {
  return guarded([&] {
    if (!kernel) throw tessera::InvalidArgument("kernel", "is null");
    kernel->kernel.run(gemm_args(args));
  });
}

const char* tessera_gemm_kernel_name(const tessera_gemm_kernel* kernel) { return kernel ? kernel->name.c_str() : ""; }
void tessera_gemm_kernel_destroy(tessera_gemm_kernel* kernel) { delete kernel; }

}  // extern "C"
