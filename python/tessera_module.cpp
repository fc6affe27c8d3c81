// The Python module `tessera` (its compiled part, `tessera._tessera`): numpy arrays and DLPack tensors bound as tensor
// views in place, tessera's Runtime, GEMM with its epilogue text and named tensors, attention, SpMM and SDDMM on
// CSR/BSR matrices (scipy.sparse's or tessera.CsrMatrix), the generated code. Errors raise
// tessera.Error (a ValueError) with the C++ message; kernels run with the GIL released.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "tessera/tessera.hpp"

namespace py = pybind11;
using namespace tessera;

namespace {

// DLPack's ABI (dlpack.h v0.8), as the __dlpack__ protocol hands it over.
struct DLDevice {
  std::int32_t device_type, device_id;
};
struct DLDataType {
  std::uint8_t code, bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
constexpr std::int32_t kDLCPU = 1;
constexpr std::uint8_t kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4;

[[noreturn]] void fail(const std::string& argument, const std::string& rule) { throw InvalidArgument(argument, rule); }

// A tensor argument: the view tessera reads or writes, and what keeps its memory alive for the call.
struct Bound {
  Tensor tensor;
  py::object owner;  // the array, or the DLPack capsule
  bool from_dlpack = false;
};

Bound from_numpy(const py::array& a, const std::string& name) {
  Bound b;
  b.owner = a;
  // float32, or the bytes of an int8 GEMM: uint8 A and int8 B.
  const char kind = a.dtype().kind();
  if (kind == 'f' && a.itemsize() == 4)
    b.tensor.dtype = DType::f32;
  else if (kind == 'u' && a.itemsize() == 1)
    b.tensor.dtype = DType::u8;
  else if (kind == 'i' && a.itemsize() == 1)
    b.tensor.dtype = DType::i8;
  else
    fail(name, "must hold float32 (or uint8/int8 for an int8 GEMM's A/B), got " + std::string(py::str(a.dtype())));
  b.tensor.data = const_cast<void*>(a.data());
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    if (a.strides(i) % a.itemsize() != 0) fail(name, "has a stride that is not a whole number of elements");
    b.tensor.shape.push_back(a.shape(i));
    b.tensor.strides.push_back(a.strides(i) / a.itemsize());
  }
  return b;
}

// The capsule's tensor, used in place; the capsule is renamed as the protocol asks and its deleter runs when the
// capsule goes (after the call).
Bound from_dlpack(const py::object& o, const std::string& name) {
  py::object capsule = o.attr("__dlpack__")();
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (!managed) {
    PyErr_Clear();
    fail(name, "__dlpack__ did not return a 'dltensor' capsule");
  }
  const DLTensor& t = managed->dl_tensor;
  if (t.device.device_type != kDLCPU)
    fail(name, "is not in host memory (DLPack device type " + std::to_string(t.device.device_type) + ")");
  Bound b;
  if (t.dtype.code == kDLFloat && t.dtype.bits == 32 && t.dtype.lanes == 1)
    b.tensor.dtype = DType::f32;
  else if (t.dtype.code == kDLBfloat && t.dtype.bits == 16 && t.dtype.lanes == 1)
    b.tensor.dtype = DType::bf16;
  else if (t.dtype.code == kDLUInt && t.dtype.bits == 8 && t.dtype.lanes == 1)
    b.tensor.dtype = DType::u8;
  else if (t.dtype.code == kDLInt && t.dtype.bits == 8 && t.dtype.lanes == 1)
    b.tensor.dtype = DType::i8;
  else
    fail(name, "must hold float32, bfloat16, uint8 or int8");
  b.tensor.data = static_cast<char*>(t.data) + t.byte_offset;
  std::int64_t stride = 1;
  b.tensor.shape.assign(t.shape, t.shape + t.ndim);
  b.tensor.strides.resize(static_cast<std::size_t>(t.ndim));
  for (int i = t.ndim - 1; i >= 0; --i) {  // no strides: compact row-major
    b.tensor.strides[static_cast<std::size_t>(i)] = t.strides ? t.strides[i] : stride;
    stride *= t.shape[i];
  }
  // The consumer owns the tensor now: rename the capsule and release it with the DLPack deleter.
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  b.owner = py::capsule(managed, [](void* p) {
    auto* m = static_cast<DLManagedTensor*>(p);
    if (m->deleter) m->deleter(m);
  });
  b.from_dlpack = true;
  return b;
}

Bound bind_object(const py::handle& h, const std::string& name) {
  if (py::isinstance<py::array>(h)) return from_numpy(py::reinterpret_borrow<py::array>(h), name);
  if (py::hasattr(h, "__dlpack__")) return from_dlpack(py::reinterpret_borrow<py::object>(h), name);
  fail(name, "expected a numpy array or an object with __dlpack__, got " +
                 std::string(py::str(py::type::handle_of(h).attr("__name__"))));
}

// A sparse matrix given as an object with indptr, indices, data and shape (scipy.sparse's CSR and BSR arrays, or
// tessera.CsrMatrix): the arrays used in place, which must be contiguous (indices int32 or int64 alike; data float32,
// BSR data [blocks, R, C]). `data` may be None for an SDDMM pattern whose epilogue does not read s.
struct BoundSparse {
  SparseMatrix matrix;
  std::vector<py::object> owners;
};

BoundSparse bind_sparse(const py::handle& h, const std::string& name) {
  for (const char* attribute : {"indptr", "indices", "data", "shape"})
    if (!py::hasattr(h, attribute))
      fail(name, std::string("expected a sparse matrix with indptr, indices, data and shape (no '") + attribute + "')");
  BoundSparse out;
  SparseMatrix& m = out.matrix;
  const auto shape = py::cast<std::vector<std::int64_t>>(h.attr("shape"));
  if (shape.size() != 2) fail(name + ".shape", "must have two extents");
  m.rows = shape[0], m.cols = shape[1];
  if (py::hasattr(h, "blocksize")) {
    const auto block = py::cast<std::vector<int>>(h.attr("blocksize"));
    if (block.size() != 2 || block[0] < 1 || block[1] < 1)
      fail(name + ".blocksize", "must be two extents of at least 1");
    m.block_rows = block[0], m.block_cols = block[1];
    m.format = m.block_rows > 1 || m.block_cols > 1 ? SparseFormat::Bsr : SparseFormat::Csr;
  }
  const auto index_array = [&](const char* attribute) {
    const py::object o = h.attr(attribute);
    if (!py::isinstance<py::array>(o)) fail(name + "." + attribute, "must be a numpy array");
    const auto a = py::reinterpret_borrow<py::array>(o);
    if (a.ndim() != 1 || (a.shape(0) > 1 && a.strides(0) != a.itemsize()))
      fail(name + "." + attribute, "must be a contiguous 1-D array");
    if (a.dtype().kind() != 'i' || (a.itemsize() != 4 && a.itemsize() != 8))
      fail(name + "." + attribute, "must hold int32 or int64, got " + std::string(py::str(a.dtype())));
    out.owners.push_back(o);
    return a;
  };
  const py::array offsets = index_array("indptr"), indices = index_array("indices");
  if (offsets.itemsize() != indices.itemsize()) fail(name + ".indices", "must have the dtype of indptr");
  // The inspector reads block_rows + 1 offsets: a shorter array would be read past its end.
  if (m.rows >= 0 && offsets.shape(0) != m.block_row_count() + 1)
    fail(name + ".indptr", "holds " + std::to_string(offsets.shape(0)) + " offsets; " + std::to_string(m.rows) +
                               " rows in blocks of " + std::to_string(m.block_rows) + " need " +
                               std::to_string(m.block_row_count() + 1));
  m.index_bits = static_cast<int>(offsets.itemsize() * 8);
  m.row_offsets = offsets.data();
  m.col_indices = indices.data();
  m.entries = indices.shape(0);
  const py::object data = h.attr("data");
  if (!data.is_none()) {
    if (!py::isinstance<py::array>(data)) fail(name + ".data", "must be a numpy array");
    const auto a = py::reinterpret_borrow<py::array>(data);
    if (a.dtype().kind() != 'f' || a.itemsize() != 4)
      fail(name + ".data", "must hold float32, got " + std::string(py::str(a.dtype())));
    if (!(a.flags() & py::array::c_style)) fail(name + ".data", "must be contiguous");
    if (a.size() != m.entries * m.block_rows * m.block_cols)
      fail(name + ".data", "holds " + std::to_string(a.size()) + " values for " + std::to_string(m.entries) +
                               " entries of " + std::to_string(m.block_rows * m.block_cols));
    m.values = a.data();
    out.owners.push_back(data);
  }
  return out;
}

// The inspector's plan of one pattern, made once and passed with every call on it (tessera.SparsePlan).
struct PySparsePlan {
  std::shared_ptr<const SparsePlan> plan;
};

std::shared_ptr<const SparsePlan> plan_of(const py::object& plan) {
  return plan.is_none() ? nullptr : py::cast<const PySparsePlan&>(plan).plan;
}

// The epilogue's named tensors of a sparse call, bound and kept alive.
void bind_inputs(const py::kwargs& named, std::vector<Bound>& keep, std::map<std::string, Tensor>& inputs) {
  for (const auto& [key, value] : named) {
    const std::string name = py::cast<std::string>(key);
    keep.push_back(bind_object(value, "inputs." + name));
    inputs[name] = keep.back().tensor;
  }
}

// `out` as given (checked writable), or a new float32 array of `shape`.
py::object output(const py::object& out, const std::vector<py::ssize_t>& shape) {
  if (out.is_none()) return py::array_t<float>(shape);
  if (py::isinstance<py::array>(out) && !py::reinterpret_borrow<py::array>(out).writeable())
    fail("out", "is read-only");
  return out;
}

struct PyRuntime {
  std::unique_ptr<Runtime> runtime;

  PyRuntime(int threads, const std::string& target, const std::string& cost_model, bool disk_cache) {
    RuntimeOptions o;
    o.threads = threads;
    o.target = target;
    o.cost_model = cost_model;
    o.disk_cache = disk_cache;
    runtime = std::make_unique<Runtime>(o);
  }

  // D = epilogue(A·B, ...): `out` written in place, or a new float32 array (row-major) returned.
  py::object gemm(const py::object& a, const py::object& b, const py::object& out, const py::object& c, float alpha,
                  float beta, const py::object& epilogue, int threads, const py::kwargs& named) {
    Bound ba = bind_object(a, "a"), bb = bind_object(b, "b");
    GemmArgs args;
    args.a = ba.tensor;
    args.b = bb.tensor;
    args.alpha = alpha;
    args.beta = beta;
    args.threads = threads;
    if (!epilogue.is_none()) args.set_epilogue(py::cast<std::string>(epilogue));
    std::vector<Bound> keep;
    if (!c.is_none()) {
      keep.push_back(bind_object(c, "c"));
      args.c = keep.back().tensor;
    }
    for (const auto& [key, value] : named) {
      const std::string name = py::cast<std::string>(key);
      keep.push_back(bind_object(value, "inputs." + name));
      args.inputs[name] = keep.back().tensor;
    }
    // The output: the caller's, or a new row-major array shaped by A and B.
    py::object result = out;
    if (out.is_none()) {
      if (args.a.rank() < 2 || args.b.rank() < 2) fail("a", "a and b must be matrices (2-D) or batches of them (3-D)");
      const std::int64_t m = args.a.shape[args.a.rank() - 2], n = args.b.shape[args.b.rank() - 1];
      std::vector<py::ssize_t> shape{m, n};
      if (args.a.rank() == 3 || args.b.rank() == 3)
        shape.insert(shape.begin(), args.a.rank() == 3 ? args.a.shape[0] : args.b.shape[0]);
      result = py::array_t<float>(shape);
    }
    if (py::isinstance<py::array>(result) && !py::reinterpret_borrow<py::array>(result).writeable())
      fail("out", "is read-only");
    Bound bd = bind_object(result, "out");
    args.d = bd.tensor;
    {
      py::gil_scoped_release release;
      runtime->gemm(args);
    }
    return result;
  }

  // O = softmax(score_mod(scale·Q·Kᵀ))·V per batch item and head: Q, K, V [batch, heads, seq, d] views of any strides
  // (BSHD memory as a transposed view), `out` written in place or a new [batch, heads, seq_q, d_v] array returned.
  // Variable lengths (FlashAttention's varlen call): packed [total, heads, d] Q, K, V and cumulative offsets
  // cu_seqlens_q / cu_seqlens_k (batch + 1 integers each); out is then [total_q, heads, d_v].
  // Keyword arrays are the modifier's tensors, keyword numbers its scalars.
  py::object attention(const py::object& q, const py::object& k, const py::object& v, const py::object& out,
                       bool causal, const py::object& scale, const py::object& score_mod, const py::object& lse,
                       const py::object& cu_seqlens_q, const py::object& cu_seqlens_k, int threads,
                       const py::kwargs& named) {
    Bound bq = bind_object(q, "q"), bk = bind_object(k, "k"), bv = bind_object(v, "v");
    AttentionArgs args;
    args.q = bq.tensor;
    args.k = bk.tensor;
    args.v = bv.tensor;
    args.causal = causal;
    if (cu_seqlens_q.is_none() != cu_seqlens_k.is_none())
      fail(cu_seqlens_q.is_none() ? "cu_seqlens_q" : "cu_seqlens_k",
           "is required with the other (variable lengths take both offset arrays)");
    if (!cu_seqlens_q.is_none()) {
      args.seq_offsets_q = offsets(cu_seqlens_q, "cu_seqlens_q");
      args.seq_offsets_kv = offsets(cu_seqlens_k, "cu_seqlens_k");
    }
    if (!scale.is_none()) args.scale = py::cast<float>(scale);
    if (!score_mod.is_none()) args.set_score_mod(py::cast<std::string>(score_mod));
    args.threads = threads;
    std::vector<Bound> keep;
    if (!lse.is_none()) {
      keep.push_back(bind_object(lse, "lse"));
      args.lse = keep.back().tensor;
    }
    for (const auto& [key, value] : named) {
      const std::string name = py::cast<std::string>(key);
      if (py::isinstance<py::float_>(value) || py::isinstance<py::int_>(value)) {
        args.scalars[name] = py::cast<float>(value);
      } else {
        keep.push_back(bind_object(value, "tensors." + name));
        args.tensors[name] = keep.back().tensor;
      }
    }
    py::object result = out;
    if (out.is_none() && !args.seq_offsets_q.empty()) {
      if (args.q.rank() != 3 || args.v.rank() != 3)
        fail("q", "with cu_seqlens, q, k and v must be packed [total, heads, d]");
      result = py::array_t<float>(std::vector<py::ssize_t>{args.q.shape[0], args.q.shape[1], args.v.shape[2]});
    } else if (out.is_none()) {
      if (args.q.rank() != 4 || args.v.rank() != 4) fail("q", "q, k and v must be [batch, heads, seq, d]");
      result = py::array_t<float>(
          std::vector<py::ssize_t>{args.q.shape[0], args.q.shape[1], args.q.shape[2], args.v.shape[3]});
    }
    if (py::isinstance<py::array>(result) && !py::reinterpret_borrow<py::array>(result).writeable())
      fail("out", "is read-only");
    Bound bo = bind_object(result, "out");
    args.o = bo.tensor;
    {
      py::gil_scoped_release release;
      runtime->attention(args);
    }
    return result;
  }

  // Cumulative sequence offsets: a 1-D array (or sequence) of integers, taken as int64.
  static std::vector<std::int64_t> offsets(const py::object& o, const std::string& name) {
    const py::array a = py::array::ensure(o);
    if (!a || a.ndim() != 1 || (a.dtype().kind() != 'i' && a.dtype().kind() != 'u'))
      fail(name, "must be a 1-D array of integers (batch + 1 cumulative offsets)");
    const auto values = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    return {values.data(), values.data() + values.size()};
  }

  PySparsePlan plan(const py::object& matrix, int threads) {
    const BoundSparse bound = bind_sparse(matrix, "matrix");
    if (threads < 0) fail("threads", "must be >= 0");
    return {std::make_shared<const SparsePlan>(
        SparsePlan::inspect(bound.matrix, threads ? threads : runtime->threads(), "matrix"))};
  }

  // D = epilogue(A·B, C, inputs) with A sparse M×K: `out` written in place or a new M×N array returned.
  py::object spmm(const py::object& a, const py::object& b, const py::object& out, const py::object& c, float alpha,
                  float beta, const py::object& epilogue, const py::object& plan, int threads,
                  const py::kwargs& named) {
    const BoundSparse sa = bind_sparse(a, "a");
    const Bound bb = bind_object(b, "b");
    SpmmArgs args;
    args.a = sa.matrix;
    args.b = bb.tensor;
    args.alpha = alpha, args.beta = beta, args.threads = threads;
    args.plan = plan_of(plan);
    if (!epilogue.is_none()) args.set_epilogue(py::cast<std::string>(epilogue));
    std::vector<Bound> keep;
    if (!c.is_none()) {
      keep.push_back(bind_object(c, "c"));
      args.c = keep.back().tensor;
    }
    bind_inputs(named, keep, args.inputs);
    if (args.b.rank() != 2) fail("b", "must be a matrix (2-D)");
    py::object result = output(out, {sa.matrix.rows, args.b.shape[1]});
    const Bound bd = bind_object(result, "out");
    args.d = bd.tensor;
    {
      py::gil_scoped_release release;
      runtime->spmm(args);
    }
    return result;
  }

  // out[p] = epilogue(A[i,:]·B[j,:]) at each stored entry p = (i, j) of the pattern, in its order (A M×K, B N×K).
  py::object sddmm(const py::object& pattern, const py::object& a, const py::object& b, const py::object& out,
                   float alpha, const py::object& epilogue, const py::object& plan, int threads,
                   const py::kwargs& named) {
    const BoundSparse sp = bind_sparse(pattern, "pattern");
    const Bound ba = bind_object(a, "a"), bb = bind_object(b, "b");
    SddmmArgs args;
    args.pattern = sp.matrix;
    args.a = ba.tensor;
    args.b = bb.tensor;
    args.alpha = alpha, args.threads = threads;
    args.plan = plan_of(plan);
    if (!epilogue.is_none()) args.set_epilogue(py::cast<std::string>(epilogue));
    std::vector<Bound> keep;
    bind_inputs(named, keep, args.inputs);
    py::object result = output(out, {sp.matrix.entries * sp.matrix.block_rows * sp.matrix.block_cols});
    const Bound bo = bind_object(result, "out");
    args.out = bo.tensor;
    {
      py::gil_scoped_release release;
      runtime->sddmm(args);
    }
    return result;
  }

  std::string emit_gemm(std::int64_t m, std::int64_t n, std::int64_t k, const std::string& epilogue,
                        const std::string& layout_a, const std::string& layout_b, bool assembly) {
    GemmProblem p;
    p.m = m, p.n = n, p.k = k;
    GemmSignature& s = p.signature;
    s.epilogue = Epilogue::parse(epilogue);
    const auto layout = [](const std::string& text, const char* name) {
      const auto l = Layout::parse(text);
      if (!l || (l->kind() != LayoutKind::RowMajor && l->kind() != LayoutKind::ColMajor))
        fail(name, "must be row or col, got '" + text + "'");
      return *l;
    };
    s.a.layout = layout(layout_a, "layout_a");
    s.b.layout = layout(layout_b, "layout_b");
    s.c = s.epilogue.reads_c() ? s.d : OperandSignature{DType::f32, Layout::zero()};
    for (const auto& t : s.epilogue.tensors())
      s.inputs.push_back(
          {t.name, t.form, {DType::f32, t.form == IndexForm::M ? Layout::col_major() : Layout::row_major()}});
    s.check();
    const CpuGemmSpec spec{s, runtime->choose_config(p), runtime->target()};
    return assembly ? gemm_host_assembly(spec) : gemm_llvm_ir(spec);
  }

  // Seconds per call of Runtime::gemm on these arrays, timed in C++ (what the Python call adds is measured against it).
  double time_gemm(const py::array& a, const py::array& b, const py::array& out, int calls) {
    GemmArgs args;
    args.a = from_numpy(a, "a").tensor;
    args.b = from_numpy(b, "b").tensor;
    args.d = from_numpy(out, "out").tensor;
    args.threads = 1;
    py::gil_scoped_release release;
    runtime->gemm(args);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) runtime->gemm(args);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls;
  }
};

}  // namespace

PYBIND11_MODULE(_tessera, m) {
  m.doc() = "tessera: JIT-generated GEMM, attention and sparse kernels on numpy arrays and DLPack tensors";
  m.attr("__version__") = TESSERA_VERSION;
  static py::exception<Error> error(m, "Error", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      error(e.what());
    }
  });
  py::class_<PySparsePlan>(m, "SparsePlan")
      .def_property_readonly("nnz", [](const PySparsePlan& p) { return p.plan->stats().nnz; })
      .def_property_readonly("rows", [](const PySparsePlan& p) { return p.plan->stats().rows; })
      .def_property_readonly("max_row", [](const PySparsePlan& p) { return p.plan->stats().max_row; })
      .def_property_readonly("tasks", [](const PySparsePlan& p) { return p.plan->splits().size() - 1; });
  py::class_<PyRuntime>(m, "Runtime")
      .def(py::init<int, const std::string&, const std::string&, bool>(), py::arg("threads") = 0,
           py::arg("target") = "cpu", py::arg("cost_model") = "default", py::arg("disk_cache") = true)
      .def("gemm", &PyRuntime::gemm, py::arg("a"), py::arg("b"), py::kw_only(), py::arg("out") = py::none(),
           py::arg("c") = py::none(), py::arg("alpha") = 1.0f, py::arg("beta") = 0.0f, py::arg("epilogue") = py::none(),
           py::arg("threads") = 0)
      .def("attention", &PyRuntime::attention, py::arg("q"), py::arg("k"), py::arg("v"), py::kw_only(),
           py::arg("out") = py::none(), py::arg("causal") = false, py::arg("scale") = py::none(),
           py::arg("score_mod") = py::none(), py::arg("lse") = py::none(), py::arg("cu_seqlens_q") = py::none(),
           py::arg("cu_seqlens_k") = py::none(), py::arg("threads") = 0)
      .def("plan", &PyRuntime::plan, py::arg("matrix"), py::arg("threads") = 0)
      .def("spmm", &PyRuntime::spmm, py::arg("a"), py::arg("b"), py::kw_only(), py::arg("out") = py::none(),
           py::arg("c") = py::none(), py::arg("alpha") = 1.0f, py::arg("beta") = 0.0f, py::arg("epilogue") = py::none(),
           py::arg("plan") = py::none(), py::arg("threads") = 0)
      .def("sddmm", &PyRuntime::sddmm, py::arg("pattern"), py::arg("a"), py::arg("b"), py::kw_only(),
           py::arg("out") = py::none(), py::arg("alpha") = 1.0f, py::arg("epilogue") = py::none(),
           py::arg("plan") = py::none(), py::arg("threads") = 0)
      .def("emit_gemm", &PyRuntime::emit_gemm, py::arg("m"), py::arg("n"), py::arg("k"), py::kw_only(),
           py::arg("epilogue") = "alpha*acc + beta*c", py::arg("layout_a") = "row", py::arg("layout_b") = "row",
           py::arg("asm") = false)
      .def("_time_gemm", &PyRuntime::time_gemm)
      .def_property_readonly("target", [](const PyRuntime& r) { return r.runtime->target().str(); })
      .def_property_readonly("threads", [](const PyRuntime& r) { return r.runtime->threads(); });
  // The view tessera makes of an object: (data pointer, dtype, shape, element strides). For checking zero-copy.
  m.def("_view", [](const py::object& o) {
    const Bound b = bind_object(o, "object");
    return py::make_tuple(reinterpret_cast<std::uintptr_t>(b.tensor.data), std::string(dtype_name(b.tensor.dtype)),
                          b.tensor.shape, b.tensor.strides);
  });
}
