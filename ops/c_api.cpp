// tessera's C API (tessera/tessera.h) over the C++ Runtime: every exception becomes a status and a per-thread message.
#include "tessera/tessera.h"

#include <algorithm>
#include <exception>
#include <map>
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

struct tessera_sparse_plan {
  std::shared_ptr<const tessera::SparsePlan> plan;
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

tessera::DType dtype(tessera_dtype d, const std::string& name) {
  switch (d) {
    case TESSERA_F32:
      return tessera::DType::f32;
    case TESSERA_BF16:
      return tessera::DType::bf16;
    case TESSERA_F16:
      return tessera::DType::f16;
    case TESSERA_U8:
      return tessera::DType::u8;
    case TESSERA_I8:
      return tessera::DType::i8;
  }
  throw tessera::InvalidArgument(name, "dtype " + std::to_string(static_cast<int>(d)) + " is not a tessera_dtype");
}

tessera::Tensor tensor(const tessera_tensor& t, const std::string& name) {
  tessera::Tensor out;
  if (!t.data && t.rank == 0) return out;  // absent
  if (t.rank < 1 || t.rank > TESSERA_MAX_RANK)
    throw tessera::InvalidArgument(
        name, "rank must be 1 to " + std::to_string(TESSERA_MAX_RANK) + ", got " + std::to_string(t.rank));
  out.dtype = dtype(t.dtype, name);
  out.data = t.data;
  out.shape.assign(t.shape, t.shape + t.rank);
  out.strides.assign(t.strides, t.strides + t.rank);
  return out;
}

// A C array of `count` named items, checked: `what` names it in errors.
template <class Item>
void check_array(const Item* items, int count, const char* what) {
  if (count < 0) throw tessera::InvalidArgument(std::string(what) + "_count", "must be >= 0");
  if (count > 0 && !items) throw tessera::InvalidArgument(what, std::string("is null but ") + what + "_count > 0");
}

std::map<std::string, tessera::Tensor> named_tensors(const tessera_named_tensor* items, int count, const char* what) {
  check_array(items, count, what);
  std::map<std::string, tessera::Tensor> out;
  for (int i = 0; i < count; ++i) {
    if (!items[i].name)
      throw tessera::InvalidArgument(std::string(what) + "[" + std::to_string(i) + "].name", "is null");
    const std::string name = std::string(what) + "." + items[i].name;
    if (!out.emplace(items[i].name, tensor(items[i].tensor, name)).second)
      throw tessera::InvalidArgument(name, "is given twice");
  }
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
  g.inputs = named_tensors(a->inputs, a->input_count, "inputs");
  return g;
}

tessera::AttentionArgs attention_args(const tessera_attention_args* a) {
  if (!a) throw tessera::InvalidArgument("args", "is null");
  tessera::AttentionArgs g;
  g.q = tensor(a->q, "q");
  g.k = tensor(a->k, "k");
  g.v = tensor(a->v, "v");
  g.o = tensor(a->o, "o");
  if (a->lse.data) g.lse = tensor(a->lse, "lse");
  g.causal = a->causal != 0;
  if (a->scale != 0) g.scale = a->scale;
  if ((a->seq_offsets_q == nullptr) != (a->seq_offsets_kv == nullptr))
    throw tessera::InvalidArgument("seq_offsets_kv", "give both seq_offsets_q and seq_offsets_kv, or neither");
  if (a->seq_offsets_q) {
    if (a->batch < 0 || a->batch > (1LL << 30))
      throw tessera::InvalidArgument("batch", "must be in [0, 2^30] with seq_offsets, got " + std::to_string(a->batch));
    g.seq_offsets_q.assign(a->seq_offsets_q, a->seq_offsets_q + a->batch + 1);
    g.seq_offsets_kv.assign(a->seq_offsets_kv, a->seq_offsets_kv + a->batch + 1);
  }
  if (a->score_mod) g.set_score_mod(a->score_mod);
  g.tensors = named_tensors(a->tensors, a->tensor_count, "tensors");
  check_array(a->scalars, a->scalar_count, "scalars");
  for (int i = 0; i < a->scalar_count; ++i) {
    if (!a->scalars[i].name) throw tessera::InvalidArgument("scalars[" + std::to_string(i) + "].name", "is null");
    if (!g.scalars.emplace(a->scalars[i].name, a->scalars[i].value).second)
      throw tessera::InvalidArgument(std::string("scalars.") + a->scalars[i].name, "is given twice");
  }
  g.threads = a->threads;
  return g;
}

tessera::SparseMatrix sparse_matrix(const tessera_sparse_matrix& m, const char* name) {
  tessera::SparseMatrix out;
  if (m.block_rows < 0 || m.block_cols < 0)
    throw tessera::InvalidArgument(
        std::string(name) + ".block_rows/block_cols",
        "must be >= 0 (0 or 1: CSR), got " + std::to_string(m.block_rows) + "x" + std::to_string(m.block_cols));
  const bool blocked = m.block_rows > 1 || m.block_cols > 1;
  out.format = blocked ? tessera::SparseFormat::Bsr : tessera::SparseFormat::Csr;
  out.rows = m.rows, out.cols = m.cols;
  out.block_rows = std::max(m.block_rows, 1), out.block_cols = std::max(m.block_cols, 1);
  out.entries = m.entries;
  out.row_offsets = m.row_offsets, out.col_indices = m.col_indices, out.values = m.values;
  out.index_bits = m.index_bits;
  out.value = dtype(m.dtype, std::string(name) + ".dtype");
  return out;
}

std::shared_ptr<const tessera::SparsePlan> plan_of(const tessera_sparse_plan* plan) {
  return plan ? plan->plan : nullptr;
}

tessera::SpmmArgs spmm_args(const tessera_spmm_args* a) {
  if (!a) throw tessera::InvalidArgument("args", "is null");
  tessera::SpmmArgs g;
  g.a = sparse_matrix(a->a, "a");
  g.b = tensor(a->b, "b");
  g.c = tensor(a->c, "c");
  g.d = tensor(a->d, "d");
  g.alpha = a->alpha;
  g.beta = a->beta;
  if (a->epilogue) g.set_epilogue(a->epilogue);
  g.inputs = named_tensors(a->inputs, a->input_count, "inputs");
  g.plan = plan_of(a->plan);
  g.threads = a->threads;
  return g;
}

tessera::SddmmArgs sddmm_args(const tessera_sddmm_args* a) {
  if (!a) throw tessera::InvalidArgument("args", "is null");
  tessera::SddmmArgs g;
  g.pattern = sparse_matrix(a->pattern, "pattern");
  g.a = tensor(a->a, "a");
  g.b = tensor(a->b, "b");
  g.out = tensor(a->out, "out");
  g.alpha = a->alpha;
  if (a->epilogue) g.set_epilogue(a->epilogue);
  g.inputs = named_tensors(a->inputs, a->input_count, "inputs");
  g.plan = plan_of(a->plan);
  g.threads = a->threads;
  return g;
}

tessera::Runtime& runtime_of(tessera_runtime* runtime) {
  if (!runtime) throw tessera::InvalidArgument("runtime", "is null");
  return *runtime->runtime;
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

int tessera_attention(tessera_runtime* runtime, const tessera_attention_args* args) {
  return guarded([&] { runtime_of(runtime).attention(attention_args(args)); });
}

int tessera_sparse_plan_create(tessera_runtime* runtime, const tessera_sparse_matrix* matrix, int threads,
                               tessera_sparse_plan** plan) {
  return guarded([&] {
    tessera::Runtime& r = runtime_of(runtime);
    if (!plan) throw tessera::InvalidArgument("plan", "is null");
    *plan = nullptr;
    if (!matrix) throw tessera::InvalidArgument("matrix", "is null");
    if (threads < 0) throw tessera::InvalidArgument("threads", "must be >= 0");
    auto made = std::make_unique<tessera_sparse_plan>();
    made->plan = std::make_shared<const tessera::SparsePlan>(
        tessera::SparsePlan::inspect(sparse_matrix(*matrix, "matrix"), threads ? threads : r.threads(), "matrix"));
    *plan = made.release();
  });
}

void tessera_sparse_plan_destroy(tessera_sparse_plan* plan) { delete plan; }

int tessera_spmm(tessera_runtime* runtime, const tessera_spmm_args* args) {
  return guarded([&] { runtime_of(runtime).spmm(spmm_args(args)); });
}

int tessera_sddmm(tessera_runtime* runtime, const tessera_sddmm_args* args) {
  return guarded([&] { runtime_of(runtime).sddmm(sddmm_args(args)); });
}

}  // extern "C"
