#include "ops/gemm/gemm_binding.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace tessera {

namespace {

// 128-bit so that extents of hostile shapes and strides cannot overflow while they are checked.
__extension__ typedef __int128 WideInt;
constexpr WideInt kMaxExtent = WideInt{1} << 60;

// A 2-D or 3-D tensor seen as a (batch of) matrices with element strides.
struct MatrixView {
  std::int64_t batch = 1, rows = 0, cols = 0;
  bool batched = false;
  TensorArg arg;
  Layout layout;
  DType dtype = DType::f32;
  WideInt extent = 0;  // elements from the first to one past the last reachable element

  const char* begin() const { return static_cast<const char*>(arg.data); }
  const char* end() const { return begin() + static_cast<std::int64_t>(extent) * dtype_bytes(dtype); }
};

void check_basics(const Tensor& t, const std::string& name) {
  if (t.strides.size() != t.shape.size())
    fail_argument(name, fmt::format("has {} dimensions but {} strides", t.shape.size(), t.strides.size()));
  for (std::size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] < 0) fail_argument(name, fmt::format("shape[{}] = {} is negative", i, t.shape[i]));
    if (t.strides[i] < 0)
      fail_argument(name, fmt::format("strides[{}] = {} is negative (views must not run backwards)", i, t.strides[i]));
  }
}

WideInt extent_of(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides,
                  const std::string& name) {
  WideInt last = 0;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    last += static_cast<WideInt>(shape[i] - 1) * strides[i];
  }
  if (last + 1 > kMaxExtent) fail_argument(name, "spans more than 2^60 elements (index overflow)");
  return last + 1;
}

MatrixView matrix_view(const Tensor& t, const std::string& name, bool output) {
  check_basics(t, name);
  if (t.rank() != 2 && t.rank() != 3)
    fail_argument(name, fmt::format("must be 2-D [rows, cols] or 3-D [batch, rows, cols], got {}-D", t.rank()));
  MatrixView v;
  v.dtype = t.dtype;
  const std::size_t r = t.rank() - 2;
  v.batched = t.rank() == 3;
  v.batch = v.batched ? t.shape[0] : 1;
  v.rows = t.shape[r];
  v.cols = t.shape[r + 1];
  std::int64_t rs = t.strides[r], cs = t.strides[r + 1];
  v.arg = {t.data, rs, cs, v.batched ? t.strides[0] : 0};
  v.extent = extent_of(t.shape, t.strides, name);
  if (v.extent > 0 && t.data == nullptr) fail_argument(name, "data is null");

  // A unit stride along a dimension of size 1 is as good as any: normalise so layouts do not depend on it.
  if (v.cols <= 1 && rs != 1) cs = 1;
  if (v.rows <= 1 && cs != 1) rs = 1;
  if (cs == 1) {
    if (v.rows > 1 && rs < v.cols)
      fail_argument(name, fmt::format("row-major leading dimension {} is less than the {} columns", rs, v.cols));
    v.layout = Layout::row_major();
  } else if (rs == 1) {
    if (v.cols > 1 && cs < v.rows)
      fail_argument(name, fmt::format("column-major leading dimension {} is less than the {} rows", cs, v.rows));
    v.layout = Layout::col_major();
  } else {
    if (output)
      fail_argument(name,
                    fmt::format("must be row-major (strides [ld >= {1}, 1]) or column-major (strides [1, ld >= {0}]); "
                                "got strides [{2}, {3}]",
                                v.rows, v.cols, rs, cs));
    v.layout = Layout::strided();
  }
  v.arg.rs = rs;
  v.arg.cs = cs;
  if (output && v.batched && v.batch > 1) {
    const WideInt one = extent_of({v.rows, v.cols}, {rs, cs}, name);
    if (v.arg.bs < one)
      fail_argument(name, fmt::format("batch stride {} makes batches overlap (each spans {} elements)", v.arg.bs,
                                      static_cast<std::int64_t>(one)));
  }
  return v;
}

// bias[n] is a row [N] or [batch, N]; scale[m] a column [M] or [batch, M].
MatrixView vector_view(const Tensor& t, const std::string& name, IndexForm form, std::int64_t length) {
  check_basics(t, name);
  const char* what = form == IndexForm::N ? "N" : "M";
  if (t.rank() != 1 && t.rank() != 2)
    fail_argument(name, fmt::format("is indexed [{}], so it must be 1-D [{}] or 2-D [batch, {}], got {}-D",
                                    form == IndexForm::N ? "n" : "m", what, what, t.rank()));
  MatrixView v;
  v.dtype = t.dtype;
  v.batched = t.rank() == 2;
  v.batch = v.batched ? t.shape[0] : 1;
  const std::int64_t size = t.shape.back(), stride = t.strides.back();
  if (size != length) fail_argument(name, fmt::format("has {} elements, the output has {} = {}", size, what, length));
  v.extent = extent_of(t.shape, t.strides, name);
  if (v.extent > 0 && t.data == nullptr) fail_argument(name, "data is null");
  const std::int64_t bs = v.batched ? t.strides[0] : 0;
  const bool unit = stride == 1 || size <= 1;
  if (form == IndexForm::N) {
    v.rows = 1;
    v.cols = size;
    v.layout = unit ? Layout::row_major() : Layout::strided();
    v.arg = {t.data, 0, unit ? 1 : stride, bs};
  } else {
    v.rows = size;
    v.cols = 1;
    v.layout = unit ? Layout::col_major() : Layout::strided();
    v.arg = {t.data, unit ? 1 : stride, 0, bs};
  }
  return v;
}

bool overlaps(const MatrixView& x, const MatrixView& y) {
  if (x.extent == 0 || y.extent == 0) return false;
  return x.begin() < y.end() && y.begin() < x.end();
}

bool same_view(const MatrixView& x, const MatrixView& y) {
  return x.arg.data == y.arg.data && x.arg.rs == y.arg.rs && x.arg.cs == y.arg.cs && x.arg.bs == y.arg.bs &&
         x.layout == y.layout;
}

// D, C and the epilogue's tensors of an M×N output, checked and described as every op with such an output binds them.
struct OutputViews {
  MatrixView d, c;
  bool c_read = false;
  std::vector<MatrixView> inputs;  // in the epilogue's tensor order
};

OutputViews bind_output_views(const Tensor& ct, const Tensor& dt, const std::map<std::string, Tensor>& given,
                              float beta, std::int64_t m, std::int64_t n, GemmSignature& s) {
  OutputViews out;
  if (dt.empty()) fail_argument("d", "is required");
  out.d = matrix_view(dt, "d", true);
  if (out.d.rows != m || out.d.cols != n)
    fail_argument("d", fmt::format("is {}x{}, the product is {}x{}", out.d.rows, out.d.cols, m, n));

  out.c_read = s.epilogue.reads_c() && !(beta == 0 && s.epilogue.c_scaled_by_beta());
  if (out.c_read) {
    if (ct.empty()) fail_argument("c", "the epilogue reads c, but no c tensor was given");
    out.c = matrix_view(ct, "c", false);
    if (out.c.rows != m || out.c.cols != n)
      fail_argument("c", fmt::format("is {}x{}, the output is {}x{}", out.c.rows, out.c.cols, m, n));
  } else {
    out.c.layout = Layout::zero();
  }

  // Epilogue tensors, in the signature's (name) order; extra names are typos worth reporting.
  for (const auto& [name, tensor] : given) {
    const auto& wanted = s.epilogue.tensors();
    if (std::none_of(wanted.begin(), wanted.end(), [&](const auto& t) { return t.name == name; }))
      fail_argument("inputs." + name, "is not read by the epilogue '" + s.epilogue.text() + "'");
  }
  for (const auto& t : s.epilogue.tensors()) {
    const std::string name = "inputs." + t.name;
    auto it = given.find(t.name);
    if (it == given.end()) fail_argument(name, "the epilogue reads " + t.name + " but no tensor was bound to it");
    MatrixView v;
    if (t.form == IndexForm::MN) {
      v = matrix_view(it->second, name, false);
      if (v.rows != m || v.cols != n)
        fail_argument(name, fmt::format("is {}x{}, the output is {}x{}", v.rows, v.cols, m, n));
    } else {
      v = vector_view(it->second, name, t.form, t.form == IndexForm::N ? n : m);
    }
    out.inputs.push_back(v);
    s.inputs.push_back({t.name, t.form, {v.dtype, v.layout}});
  }
  s.c = {out.c_read ? out.c.dtype : DType::f32, out.c.layout};
  s.d = {out.d.dtype, out.d.layout};
  return out;
}

// D is written while the others are read: elementwise operands may be D itself, nothing may partly overlap it.
void check_output_overlaps(const OutputViews& o, const GemmSignature& s) {
  if (o.c_read && overlaps(o.d, o.c) && !same_view(o.d, o.c))
    fail_argument("d", "partly overlaps c (in place needs the same view)");
  for (std::size_t i = 0; i < o.inputs.size(); ++i) {
    const bool elementwise = s.inputs[i].form == IndexForm::MN && same_view(o.d, o.inputs[i]);
    if (overlaps(o.d, o.inputs[i]) && !elementwise) fail_argument("d", "overlaps inputs." + s.inputs[i].name);
  }
}

}  // namespace

namespace {
MatrixOperand operand_of(const MatrixView& v, const std::string& name) {
  if (v.batched && v.batch != 1) fail_argument(name, fmt::format("must be 2-D, got a batch of {}", v.batch));
  return {v.rows, v.cols, v.arg, v.layout, v.dtype, static_cast<std::int64_t>(v.extent) * dtype_bytes(v.dtype)};
}
}  // namespace

MatrixOperand bind_matrix(const Tensor& t, const std::string& name) {
  return operand_of(matrix_view(t, name, false), name);
}

MatrixOperand bind_vector(const Tensor& t, const std::string& name, IndexForm form, std::int64_t length) {
  return operand_of(vector_view(t, name, form, length), name);
}

OutputBinding bind_output(const Tensor& c, const Tensor& d, const std::map<std::string, Tensor>& inputs,
                          const Epilogue& epilogue, float beta, std::int64_t m, std::int64_t n,
                          const std::vector<ReadRange>& reads) {
  OutputBinding bound;
  bound.signature.epilogue = epilogue;
  const OutputViews o = bind_output_views(c, d, inputs, beta, m, n, bound.signature);
  if (o.d.batched && o.d.batch != 1) fail_argument("d", "must be 2-D [M, N]");
  if (o.c_read && o.c.batched && o.c.batch != 1) fail_argument("c", "must be 2-D [M, N]");
  for (std::size_t i = 0; i < o.inputs.size(); ++i)
    if (o.inputs[i].batched && o.inputs[i].batch != 1)
      fail_argument("inputs." + bound.signature.inputs[i].name, "is batched");
  for (const ReadRange& r : reads) {
    if (r.bytes <= 0 || o.d.extent == 0) continue;
    const char* begin = static_cast<const char*>(r.data);
    if (o.d.begin() < begin + r.bytes && begin < o.d.end()) fail_argument("d", "overlaps " + r.name);
  }
  check_output_overlaps(o, bound.signature);
  bound.c = o.c_read ? o.c.arg : TensorArg{};
  bound.d = o.d.arg;
  for (const auto& v : o.inputs) bound.inputs.push_back(v.arg);
  return bound;
}

GemmBinding bind_gemm(const GemmArgs& g) {
  GemmBinding bound;
  GemmProblem& p = bound.problem;
  GemmSignature& s = p.signature;
  s.epilogue = g.epilogue;
  p.threads = g.threads;

  if (g.a.empty()) fail_argument("a", "is required");
  if (g.b.empty()) fail_argument("b", "is required");
  if (g.d.empty()) fail_argument("d", "is required");
  const MatrixView a = matrix_view(g.a, "a", false);
  const MatrixView b = matrix_view(g.b, "b", false);
  p.m = a.rows;
  p.k = a.cols;
  p.n = b.cols;
  if (b.rows != p.k) fail_argument("b", fmt::format("has {} rows, but a has K = {} columns", b.rows, p.k));
  const OutputViews o = bind_output_views(g.c, g.d, g.inputs, g.beta, p.m, p.n, s);
  const MatrixView& d = o.d;

  // Batch: every batched operand agrees; 2-D operands are shared by all batches.
  p.batch = d.batch;
  const auto check_batch = [&](const MatrixView& v, const std::string& name) {
    if (v.batched && v.batch != p.batch)
      fail_argument(name, fmt::format("has batch {}, d has batch {}", v.batch, p.batch));
  };
  if (!d.batched && ((a.batched && a.batch != 1) || (b.batched && b.batch != 1)))
    fail_argument("d", "must be 3-D [batch, M, N] when a or b is batched");
  check_batch(a, "a");
  check_batch(b, "b");
  if (o.c_read) check_batch(o.c, "c");
  for (std::size_t i = 0; i < o.inputs.size(); ++i) check_batch(o.inputs[i], "inputs." + s.inputs[i].name);

  if (overlaps(d, a)) fail_argument("d", "overlaps a");
  if (overlaps(d, b)) fail_argument("d", "overlaps b");
  check_output_overlaps(o, s);

  s.a = {a.dtype, a.layout};
  s.b = {b.dtype, b.layout};
  s.accumulator = is_int8(s) ? DType::i32 : DType::f32;
  s.check();

  GemmKernelArgs& k = bound.args;
  k.m = p.m;
  k.n = p.n;
  k.k = p.k;
  k.batch = p.batch;
  k.a = a.arg;
  k.b = b.arg;
  k.c = o.c_read ? o.c.arg : TensorArg{};
  k.d = d.arg;
  k.alpha = g.alpha;
  k.beta = g.beta;
  for (const auto& v : o.inputs) bound.inputs.push_back(v.arg);
  return bound;
}

GemmBinding transposed(const GemmBinding& binding) {
  const auto flip = [](TensorArg t) {
    std::swap(t.rs, t.cs);
    return t;
  };
  GemmBinding t = binding;
  t.problem = transposed(binding.problem);
  const GemmKernelArgs& k = binding.args;
  t.args.m = k.n;
  t.args.n = k.m;
  t.args.a = flip(k.b);
  t.args.b = flip(k.a);
  t.args.c = flip(k.c);
  t.args.d = flip(k.d);
  for (TensorArg& in : t.inputs) in = flip(in);
  return t;
}

}  // namespace tessera
