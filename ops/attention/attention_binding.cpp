#include "ops/attention/attention_binding.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "generator/core/arith.hpp"
#include "generator/core/error.hpp"
#include "generator/core/expr_bounds.hpp"

namespace tessera {

namespace {

std::string shape_text(const std::vector<std::int64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

void check_tensor(const std::string& name, const Tensor& t, std::size_t rank, DType dtype = DType::f32) {
  if (t.rank() != rank)
    throw InvalidArgument(name, fmt::format("must have rank {}, has shape {}", rank, shape_text(t.shape)));
  if (t.strides.size() != rank)
    throw InvalidArgument(name, fmt::format("has {} strides for rank {}", t.strides.size(), rank));
  for (std::int64_t e : t.shape)
    if (e < 0) throw InvalidArgument(name, "extents must be >= 0, shape is " + shape_text(t.shape));
  for (std::int64_t s : t.strides)
    if (s < 0) throw InvalidArgument(name, "strides must be >= 0, strides are " + shape_text(t.strides));
  if (t.dtype != dtype)
    throw InvalidArgument(name, fmt::format("is {}; {}", dtype_name(t.dtype),
                                            name == "q" ? std::string("attention takes f32, bf16 or f16")
                                                        : "it must be " + std::string(dtype_name(dtype))));
  // The farthest element must be addressable: offsets are 64-bit element counts, multiplied by the element size.
  double reach = 0;
  for (std::size_t d = 0; d < rank; ++d) reach += static_cast<double>(t.shape[d] - (t.shape[d] > 0)) * t.strides[d];
  if (reach > 0x1p60)
    throw InvalidArgument(name, fmt::format("shape {} with strides {} reaches past 2^60 elements", shape_text(t.shape),
                                            shape_text(t.strides)));
  const bool empty = std::any_of(t.shape.begin(), t.shape.end(), [](std::int64_t e) { return e == 0; });
  if (!empty && t.data == nullptr) throw InvalidArgument(name, "data is null");
}

// Bytes [first, last) a view spans (empty for an empty view).
struct Span {
  std::uintptr_t first = 0, last = 0;
};
Span span_of(const Tensor& t) {
  std::int64_t extent = 0;
  for (std::size_t d = 0; d < t.rank(); ++d) {
    if (t.shape[d] == 0) return {};
    extent += (t.shape[d] - 1) * t.strides[d];
  }
  const auto first = reinterpret_cast<std::uintptr_t>(t.data);
  return {first, first + static_cast<std::uintptr_t>(extent + 1) * static_cast<std::uintptr_t>(dtype_bytes(t.dtype))};
}
bool overlaps(const Span& a, const Span& b) { return a.first < b.last && b.first < a.last && a.first != a.last; }

// An output view whose elements do not share memory: sorted by stride, each dimension steps past the previous ones.
void check_distinct_elements(const std::string& name, const Tensor& t) {
  std::vector<std::size_t> dims;
  for (std::size_t d = 0; d < t.rank(); ++d)
    if (t.shape[d] > 1) dims.push_back(d);
  std::sort(dims.begin(), dims.end(), [&](std::size_t a, std::size_t b) { return t.strides[a] < t.strides[b]; });
  std::int64_t reach = 1;  // elements spanned by the dimensions so far
  for (std::size_t d : dims) {
    if (t.strides[d] < reach)
      throw InvalidArgument(name, fmt::format("strides {} make elements of shape {} overlap", shape_text(t.strides),
                                              shape_text(t.shape)));
    reach = t.strides[d] * (t.shape[d] - 1) + reach;
  }
}

void check_offsets(const std::string& name, const std::vector<std::int64_t>& offsets, std::int64_t total) {
  if (offsets.empty() || offsets.front() != 0) throw InvalidArgument(name, "must start at 0");
  for (std::size_t b = 1; b < offsets.size(); ++b)
    if (offsets[b] < offsets[b - 1])
      throw InvalidArgument(name,
                            fmt::format("must not decrease: entry {} is {} after {}", b, offsets[b], offsets[b - 1]));
  if (offsets.back() != total)
    throw InvalidArgument(
        name, fmt::format("ends at {}, but the packed sequence dimension holds {} rows", offsets.back(), total));
}

// Every read of a modifier tensor in range for every position of this call (i < seq_q, j < seq_kv, h < heads,
// b < batch), proven by interval bounds: the kernel reads each index it computes, in both branches of a select.
void check_modifier_reads(const ScoreModifier& mod, const std::map<std::string, Tensor>& tensors,
                          const AttentionProblem& p) {
  if (p.seq_q == 0 || p.seq_kv == 0 || p.heads == 0 || p.batch == 0) return;
  const auto range = [&](const std::string& name) -> Interval {
    const std::int64_t last = name == "i" ? p.seq_q : name == "j" ? p.seq_kv : name == "h" ? p.heads : p.batch;
    return {0, static_cast<double>(last - 1)};
  };
  visit(mod.tree(), [&](const ExprNode& node) {
    if (node.op != ExprOp::Read) return;
    const Tensor& t = tensors.at(node.name);
    for (std::size_t k = 0; k < node.args.size(); ++k) {
      const Interval bounds = int_bounds(node.args[k], range);
      if (!bounds.within(0, static_cast<double>(t.shape[k] - 1)))
        throw InvalidArgument("tensors[" + node.name + "]",
                              fmt::format("index {} ('{}') reaches [{}, {}] for these sizes (i < {}, j < {}, h < {}, "
                                          "b < {}); dimension {} has extent {}",
                                          k, to_string(node.args[k]), bounds.lo, bounds.hi, p.seq_q, p.seq_kv, p.heads,
                                          p.batch, k, t.shape[k]));
    }
  });
}

AttentionView view_of(const Tensor& t, bool varlen) {
  const auto* data = static_cast<const std::byte*>(t.data);
  const std::int64_t bytes = dtype_bytes(t.dtype);
  if (varlen) return {data, 0, t.strides[1], t.strides[0], t.strides[2], bytes};
  return {data, t.strides[0], t.strides[1], t.strides[2], t.strides[3], bytes};
}

}  // namespace

AttentionBinding bind_attention(const AttentionArgs& args) {
  AttentionBinding r;
  AttentionProblem& p = r.problem;
  const bool varlen = !args.seq_offsets_q.empty() || !args.seq_offsets_kv.empty();
  const std::size_t rank = varlen ? 3 : 4;
  // Q, K, V and O of one type, f32, bf16 or f16 (scores, softmax and accumulation are f32 in every case); which
  // types a back-end's kernel takes, the back-end checks.
  const DType dtype = args.q.dtype == DType::bf16 || args.q.dtype == DType::f16 ? args.q.dtype : DType::f32;
  check_tensor("q", args.q, rank, dtype);
  check_tensor("k", args.k, rank, dtype);
  check_tensor("v", args.v, rank, dtype);
  check_tensor("o", args.o, rank, dtype);
  // Dimension indices: [batch, heads, seq, dim], or varlen [total, heads, dim].
  const std::size_t H = 1, S = varlen ? 0 : 2, D = varlen ? 2 : 3;
  if (varlen) {
    if (args.seq_offsets_q.size() != args.seq_offsets_kv.size())
      throw InvalidArgument("seq_offsets_kv", fmt::format("has {} entries, seq_offsets_q has {}; both are batch + 1",
                                                          args.seq_offsets_kv.size(), args.seq_offsets_q.size()));
    check_offsets("seq_offsets_q", args.seq_offsets_q, args.q.shape[S]);
    check_offsets("seq_offsets_kv", args.seq_offsets_kv, args.k.shape[S]);
    p.batch = static_cast<std::int64_t>(args.seq_offsets_q.size()) - 1;
    for (std::int64_t b = 0; b < p.batch; ++b) {
      const auto i = static_cast<std::size_t>(b);
      p.seq_lens_q.push_back(args.seq_offsets_q[i + 1] - args.seq_offsets_q[i]);
      p.seq_lens_kv.push_back(args.seq_offsets_kv[i + 1] - args.seq_offsets_kv[i]);
    }
    p.seq_q = p.seq_lens_q.empty() ? 0 : *std::max_element(p.seq_lens_q.begin(), p.seq_lens_q.end());
    p.seq_kv = p.seq_lens_kv.empty() ? 0 : *std::max_element(p.seq_lens_kv.begin(), p.seq_lens_kv.end());
  } else {
    p.batch = args.q.shape[0];
    p.seq_q = args.q.shape[S];
    p.seq_kv = args.k.shape[S];
    for (const auto& [name, t] : {std::pair<const char*, const Tensor&>{"k", args.k}, {"v", args.v}, {"o", args.o}})
      if (t.shape[0] != p.batch)
        throw InvalidArgument(name, fmt::format("has batch {}, q has {}", t.shape[0], p.batch));
  }
  p.heads = args.q.shape[H];
  p.kv_heads = args.k.shape[H];
  AttentionSignature& sig = p.signature;
  sig.dtype = dtype;
  sig.head_dim_qk = args.q.shape[D];
  sig.head_dim_v = args.v.shape[D];
  const auto expect = [](const char* name, const Tensor& t, std::size_t dim, std::int64_t want, const char* what) {
    if (t.shape[dim] != want)
      throw InvalidArgument(name, fmt::format("shape {}: dimension {} must be {} ({}), is {}", shape_text(t.shape), dim,
                                              want, what, t.shape[dim]));
  };
  expect("k", args.k, D, sig.head_dim_qk, "q's head_dim");
  expect("v", args.v, H, p.kv_heads, "k's heads");
  expect("v", args.v, S, args.k.shape[S], "k's sequence length");
  expect("o", args.o, H, p.heads, "q's heads");
  expect("o", args.o, S, args.q.shape[S], "q's sequence length");
  expect("o", args.o, D, sig.head_dim_v, "v's head_dim");
  if (p.kv_heads == 0 && p.heads > 0) throw InvalidArgument("k", "has 0 heads; q has " + std::to_string(p.heads));
  if (p.kv_heads > 0 && p.heads % p.kv_heads != 0)
    throw InvalidArgument("k", fmt::format("heads of q ({}) must be a multiple of kv heads ({})", p.heads, p.kv_heads));
  if (sig.head_dim_qk < 1 || sig.head_dim_qk > 512)
    throw InvalidArgument("q", fmt::format("head_dim {} must be in [1, 512]", sig.head_dim_qk));
  if (sig.head_dim_v < 1 || sig.head_dim_v > 512)
    throw InvalidArgument("v", fmt::format("head_dim {} must be in [1, 512]", sig.head_dim_v));
  sig.q_unit_d = args.q.strides[D] == 1;
  sig.k_unit_d = args.k.strides[D] == 1;
  sig.v_unit_d = args.v.strides[D] == 1;
  sig.o_unit_d = args.o.strides[D] == 1;
  sig.causal = args.causal;
  sig.score_mod = args.score_mod;
  check_distinct_elements("o", args.o);
  const Span o_span = span_of(args.o);
  for (const auto& [name, t] : {std::pair<const char*, const Tensor&>{"q", args.q}, {"k", args.k}, {"v", args.v}})
    if (overlaps(o_span, span_of(t))) throw InvalidArgument("o", std::string("overlaps ") + name + "'s memory");

  if (!args.lse.empty()) {
    sig.lse = true;
    const std::vector<std::int64_t> want = varlen ? std::vector<std::int64_t>{p.heads, args.q.shape[S]}
                                                  : std::vector<std::int64_t>{p.batch, p.heads, p.seq_q};
    check_tensor("lse", args.lse, want.size());
    if (args.lse.shape != want)
      throw InvalidArgument("lse",
                            fmt::format("must have shape {}, has {}", shape_text(want), shape_text(args.lse.shape)));
    check_distinct_elements("lse", args.lse);
    const Span lse_span = span_of(args.lse);
    for (const auto& [name, t] :
         {std::pair<const char*, const Tensor&>{"q", args.q}, {"k", args.k}, {"v", args.v}, {"o", args.o}})
      if (overlaps(lse_span, span_of(t))) throw InvalidArgument("lse", std::string("overlaps ") + name + "'s memory");
    r.lse = static_cast<float*>(args.lse.data);
    if (varlen) {
      r.lse_head = args.lse.strides[0], r.lse_seq = args.lse.strides[1];
    } else {
      r.lse_batch = args.lse.strides[0], r.lse_head = args.lse.strides[1], r.lse_seq = args.lse.strides[2];
    }
  }

  // The modifier's names: every tensor and scalar it reads bound, nothing bound that it does not read.
  const ScoreModifier& mod = args.score_mod;
  for (const auto& use : mod.tensors()) {
    auto it = args.tensors.find(use.name);
    if (it == args.tensors.end())
      throw InvalidArgument("score_mod", "reads tensor '" + use.name + "', which the call does not give");
    if (use.rank > 4) throw InvalidArgument("score_mod", "tensor '" + use.name + "' has more than 4 indices");
    check_tensor("tensors[" + use.name + "]", it->second, use.rank);
    ModifierTensorArg t;
    t.data = static_cast<const float*>(it->second.data);
    for (std::size_t d = 0; d < use.rank; ++d) t.strides[d] = it->second.strides[d];
    r.tensors.push_back(t);
  }
  check_modifier_reads(mod, args.tensors, p);
  for (const auto& [name, t] : args.tensors)
    if (std::none_of(mod.tensors().begin(), mod.tensors().end(), [&](const auto& u) { return u.name == name; }))
      throw InvalidArgument("tensors[" + name + "]", "is not read by the score modifier '" + mod.text() + "'");
  for (const auto& name : mod.scalars()) {
    auto it = args.scalars.find(name);
    if (it == args.scalars.end())
      throw InvalidArgument("score_mod", "reads scalar '" + name + "', which the call does not give");
    r.scalars.push_back(it->second);
  }
  for (const auto& [name, value] : args.scalars)
    if (!std::binary_search(mod.scalars().begin(), mod.scalars().end(), name))
      throw InvalidArgument("scalars[" + name + "]", "is not read by the score modifier '" + mod.text() + "'");

  r.scale = args.scale ? *args.scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(sig.head_dim_qk)));
  if (!std::isfinite(r.scale)) throw InvalidArgument("scale", "must be finite");
  if (args.threads < 0) throw InvalidArgument("threads", "must be >= 0 (0: every thread of the runtime)");
  p.threads = args.threads;
  r.q = view_of(args.q, varlen);
  r.k = view_of(args.k, varlen);
  r.v = view_of(args.v, varlen);
  r.o = view_of(args.o, varlen);
  if (varlen) {
    r.offsets_q = args.seq_offsets_q;
    r.offsets_kv = args.seq_offsets_kv;
  }
  sig.check();
  return r;
}

AttentionCall AttentionBinding::call() const {
  const AttentionProblem& p = problem;
  AttentionCall c;
  c.batch = p.batch, c.heads = p.heads, c.kv_heads = p.kv_heads, c.seq_q = p.seq_q, c.seq_kv = p.seq_kv;
  c.offsets_q = offsets_q.empty() ? nullptr : offsets_q.data();
  c.offsets_kv = offsets_kv.empty() ? nullptr : offsets_kv.data();
  c.head_dim_v = p.signature.head_dim_v;
  c.o_bf16 = p.signature.dtype == DType::bf16;
  c.q = q, c.k = k, c.v = v, c.o = o;
  c.lse = lse, c.lse_batch = lse_batch, c.lse_head = lse_head, c.lse_seq = lse_seq;
  c.tensors = tensors.data();
  c.scalars = scalars.data();
  c.scale = scale;
  return c;
}

AttentionBlocking blocking_of(const CpuAttentionSpec& spec) {
  AttentionBlocking k;
  k.block_q = spec.config.block_q;
  k.block_kv = spec.config.block_kv;
  k.in_place = spec.config.in_place;
  k.packed_block_floats = spec.config.packed_block_floats(spec.signature, spec.target);
  k.workspace_bytes = spec.config.workspace_bytes(spec.signature, spec.target);
  return k;
}

void skip_masked_key_blocks(AttentionBlockArgs& a, const ScoreModifier& mod, int block_kv) {
  if (!mod.can_mask() || a.rows <= 0 || a.seq_kv <= 0) return;
  // The conditions under which the modifier is −inf: c1 ? -inf : (c2 ? -inf : ...).
  std::vector<Expr> masks;
  for (Expr e = mod.tree(); e->op == ExprOp::Select;) {
    const Expr& then = e->args[1];
    const bool negative_infinity = (then->op == ExprOp::Const && std::isinf(then->value) && then->value < 0) ||
                                   (then->op == ExprOp::Neg && then->args[0]->op == ExprOp::Const &&
                                    std::isinf(then->args[0]->value) && then->args[0]->value > 0);
    if (!negative_infinity) break;
    masks.push_back(e->args[0]);
    e = e->args[2];
  }
  if (masks.empty()) return;
  const double i_lo = static_cast<double>(a.i0), i_hi = static_cast<double>(a.i0 + std::min(a.rows, a.positions) - 1);
  const double h_lo = static_cast<double>(a.head), h_hi = static_cast<double>(a.head + (a.rows - 1) / a.positions);
  const auto masked = [&](std::int64_t first_key) {
    const std::int64_t last_key = std::min(first_key + block_kv, a.seq_kv) - 1;
    const auto range = [&](const std::string& name) -> Interval {
      if (name == "i") return {i_lo, i_hi};
      if (name == "j") return {static_cast<double>(first_key), static_cast<double>(last_key)};
      if (name == "h") return {h_lo, h_hi};
      return {static_cast<double>(a.batch_index), static_cast<double>(a.batch_index)};
    };
    return std::any_of(masks.begin(), masks.end(), [&](const Expr& c) { return always_holds(c, range); });
  };
  const std::int64_t blocks = ceil_div(a.seq_kv, block_kv);
  std::int64_t first = 0, last = blocks - 1;
  while (first < blocks && masked(first * block_kv)) ++first;
  while (last >= first && masked(last * block_kv)) --last;
  a.kv_begin = first * block_kv;
  a.kv_stop = first > last ? a.kv_begin : std::min(a.seq_kv, (last + 1) * block_kv);
}

}  // namespace tessera
