#include "bench/attention_benchmark.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <cmath>
#include <dnnl.hpp>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>
#include "bench/agreement.hpp"
#include "bench/peers/torch_attention_peer.hpp"
#include "bench/stream_read.hpp"
#include "generator/core/arith.hpp"
#include "generator/core/error.hpp"
#include "tessera/tessera.hpp"

namespace tessera::bench {

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

AttentionShape parse_line(const std::vector<std::int64_t>& v, const std::string& where) {
  if (v.size() != 7) throw InvalidArgument(where, "expects B H KV_HEADS SQ SKV D CAUSAL");
  AttentionShape s{v[0], v[1], v[2], v[3], v[4], v[5], v[6] != 0};
  if (s.batch < 1 || s.heads < 1 || s.kv_heads < 1 || s.seq_q < 1 || s.seq_kv < 1 || s.head_dim < 1 ||
      s.heads % s.kv_heads != 0)
    throw InvalidArgument(where, "sizes must be >= 1 and heads a multiple of kv heads");
  return s;
}

// The unfused peer for one head: oneDNN primitives created once per shape, run on each head's buffers in turn.
// bf16 (`bf16`): Q, K, V, the scores and O in bf16, as a framework's bf16 matmul and softmax leave them.
class OnednnUnfused {
 public:
  OnednnUnfused(const AttentionShape& s, float scale, bool bf16, dnnl::engine& engine)
      : engine_(engine), stream_(engine), s_(s) {
    const dt type = bf16 ? dt::bf16 : dt::f32;
    const auto q_d = dnnl::memory::desc({s.seq_q, s.head_dim}, type, tag::ab);
    // Kᵀ read in place: K is [seq_kv, d] row-major, so its transpose is the same memory as column-major.
    const auto kt_d = dnnl::memory::desc({s.head_dim, s.seq_kv}, type, tag::ba);
    const auto s_d = dnnl::memory::desc({s.seq_q, s.seq_kv}, type, tag::ab);
    const auto v_d = dnnl::memory::desc({s.seq_kv, s.head_dim}, type, tag::ab);
    const auto o_d = dnnl::memory::desc({s.seq_q, s.head_dim}, type, tag::ab);
    dnnl::primitive_attr qk_attr;
    qk_attr.set_output_scales(0, {scale});
    if (s.causal) {
      // The mask a framework adds: 0 where key j is visible to query i, −inf above the (bottom-right) diagonal.
      mask_.resize(static_cast<std::size_t>(s.seq_q * s.seq_kv));
      for (std::int64_t i = 0; i < s.seq_q; ++i)
        for (std::int64_t j = 0; j < s.seq_kv; ++j)
          mask_[static_cast<std::size_t>(i * s.seq_kv + j)] = j <= i + s.seq_kv - s.seq_q ? 0.0f : -INFINITY;
      dnnl::post_ops ops;
      ops.append_binary(dnnl::algorithm::binary_add, dnnl::memory::desc({s.seq_q, s.seq_kv}, dt::f32, tag::ab));
      qk_attr.set_post_ops(ops);
      mask_mem_ = dnnl::memory(dnnl::memory::desc({s.seq_q, s.seq_kv}, dt::f32, tag::ab), engine, mask_.data());
    }
    qk_ = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(q_d, kt_d, s_d), qk_attr, engine));
    softmax_ = dnnl::softmax_forward(dnnl::softmax_forward::primitive_desc(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, s_d, 1), engine));
    pv_ = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(s_d, v_d, o_d), engine));
    scores_.resize(static_cast<std::size_t>(s.seq_q * s.seq_kv));
    q_mem_ = dnnl::memory(q_d, engine, nullptr);
    k_mem_ = dnnl::memory(kt_d, engine, nullptr);
    v_mem_ = dnnl::memory(v_d, engine, nullptr);
    o_mem_ = dnnl::memory(o_d, engine, nullptr);
    s_mem_ = dnnl::memory(s_d, engine, scores_.data());
  }

  void run_head(const void* q, const void* k, const void* v, void* o) {
    q_mem_.set_data_handle(const_cast<void*>(q));
    k_mem_.set_data_handle(const_cast<void*>(k));
    v_mem_.set_data_handle(const_cast<void*>(v));
    o_mem_.set_data_handle(o);
    std::unordered_map<int, dnnl::memory> qk_args{
        {DNNL_ARG_SRC, q_mem_}, {DNNL_ARG_WEIGHTS, k_mem_}, {DNNL_ARG_DST, s_mem_}};
    if (s_.causal) qk_args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = mask_mem_;
    qk_.execute(stream_, qk_args);
    softmax_.execute(stream_, {{DNNL_ARG_SRC, s_mem_}, {DNNL_ARG_DST, s_mem_}});
    pv_.execute(stream_, {{DNNL_ARG_SRC, s_mem_}, {DNNL_ARG_WEIGHTS, v_mem_}, {DNNL_ARG_DST, o_mem_}});
    stream_.wait();
  }

  std::size_t scores_bytes() const { return scores_.size() * sizeof(float); }

 private:
  dnnl::engine& engine_;
  dnnl::stream stream_;
  AttentionShape s_;
  std::vector<float> mask_, scores_;
  dnnl::memory mask_mem_, q_mem_, k_mem_, v_mem_, o_mem_, s_mem_;
  dnnl::matmul qk_, pv_;
  dnnl::softmax_forward softmax_;
};

}  // namespace

std::string AttentionShape::label() const {
  std::string l = fmt::format("{}x{}/{}x{}", batch, heads, kv_heads, seq_q);
  if (seq_kv != seq_q) l += fmt::format(":{}", seq_kv);
  return l + fmt::format("xd{}{}", head_dim, causal ? "c" : "");
}

std::vector<AttentionShape> load_attention_suite(const std::string& path_or_name) {
  std::string path = path_or_name;
  if (path.find('/') == std::string::npos) path = std::string(TESSERA_SOURCE_DIR) + "/bench/suites/" + path + ".txt";
  std::ifstream in(path);
  if (!in) throw InvalidArgument("--suite", "cannot read " + path);
  std::vector<AttentionShape> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream fields(line);
    std::vector<std::int64_t> v;
    std::int64_t x = 0;
    while (fields >> x) v.push_back(x);
    if (!fields.eof()) throw InvalidArgument("--suite", fmt::format("{}:{}: not a number", path, number));
    if (!v.empty()) out.push_back(parse_line(v, fmt::format("{}:{}", path, number)));
  }
  if (out.empty()) throw InvalidArgument("--suite", path + " holds no shapes");
  return out;
}

std::vector<AttentionShape> parse_attention_shapes(const std::string& list) {
  std::vector<AttentionShape> out;
  std::istringstream items(list);
  std::string item;
  while (std::getline(items, item, ',')) {
    const bool causal = !item.empty() && item.back() == 'c';
    if (causal) item.pop_back();
    std::vector<std::int64_t> v;
    std::istringstream parts(item);
    std::string part;
    while (std::getline(parts, part, 'x')) {
      try {
        v.push_back(std::stoll(part));
      } catch (const std::exception&) {
        throw InvalidArgument("--shapes", "'" + item + "' is not BxHxGxSQxSKVxD[c]");
      }
    }
    v.push_back(causal);
    out.push_back(parse_line(v, "--shapes " + item));
  }
  return out;
}

nlohmann::json run_attention_benchmark(const std::vector<AttentionShape>& shapes, const std::vector<int>& thread_counts,
                                       int repeat, const Sampling& sampling, DType dtype, std::ostream& log) {
  const bool bf16 = dtype == DType::bf16;
  const std::size_t element_bytes = bf16 ? 2 : 4;
  nlohmann::json rows = nlohmann::json::array();
  Runtime runtime;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  std::map<int, double> stream;  // GB/s of a plain read, per thread count
  for (int threads : thread_counts) stream[threads] = stream_read_gbps(threads);
  log << "stream read (GB/s):";
  for (const auto& [threads, gbps] : stream)
    log << fmt::format(" {:.1f} on {} thread{}", gbps, threads, threads > 1 ? "s" : "");
  const std::string torch_missing = TorchAttention::unavailable();
  if (torch_missing.empty())
    log << fmt::format("\nPyTorch {} (unfused: matmul, softmax, matmul)", TorchAttention::version());
  else
    log << "\nno PyTorch peer: " << torch_missing;
  log << fmt::format("\n{:<26} {:>3} {:>12} {:>12} {:>10} {:>14} {:>10} {:>12} {:>8} {:>8}\n", "shape", "thr",
                     "tessera ms", "unfused ms", "tessera GF", "fused/unfused", "torch ms", "fused/torch", "GB/s",
                     "%stream");
  for (const AttentionShape& s : shapes) {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> dist(-1, 1);
    // BHSD, dense: each head's [seq, d] matrix is contiguous, as the per-head peer needs.
    const auto size = [&](std::int64_t heads, std::int64_t seq) {
      return static_cast<std::size_t>(s.batch * heads * seq * s.head_dim);
    };
    std::vector<float> q(size(s.heads, s.seq_q)), k(size(s.kv_heads, s.seq_kv)), v(size(s.kv_heads, s.seq_kv)),
        o(size(s.heads, s.seq_q)), o_peer(size(s.heads, s.seq_q)), o_torch(size(s.heads, s.seq_q));
    for (auto* x : {&q, &k, &v})
      for (float& e : *x) e = dist(rng);
    // bf16: the same values rounded, in buffers of half the size; both contenders read and write those.
    std::vector<std::uint16_t> q16, k16, v16, o16, o16_peer, o16_torch;
    if (bf16) {
      for (auto [from, to] :
           {std::pair{&q, &q16}, {&k, &k16}, {&v, &v16}, {&o, &o16}, {&o_peer, &o16_peer}, {&o_torch, &o16_torch}})
        for (float e : *from) to->push_back(to_bf16(e));
    }
    const auto data = [&](std::vector<float>& f32, std::vector<std::uint16_t>& half) -> void* {
      return bf16 ? static_cast<void*>(half.data()) : f32.data();
    };
    const auto view = [&](void* at, std::int64_t heads, std::int64_t seq) {
      const std::int64_t d = s.head_dim;
      return Tensor{at, dtype, {s.batch, heads, seq, d}, {heads * seq * d, seq * d, d, 1}};
    };
    AttentionArgs args;
    args.q = view(data(q, q16), s.heads, s.seq_q), args.k = view(data(k, k16), s.kv_heads, s.seq_kv);
    args.v = view(data(v, v16), s.kv_heads, s.seq_kv), args.o = view(data(o, o16), s.heads, s.seq_q);
    args.causal = s.causal;
    const AttentionProblem problem = runtime.describe(args);
    const AttentionKernel kernel = runtime.compile(problem);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
    for (int threads : thread_counts) {
      args.threads = threads;
      omp_set_num_threads(threads);
      OnednnUnfused peer(s, scale, bf16, engine);
      const auto unfused = [&] {
        omp_set_num_threads(threads);
        const std::int64_t group = s.heads / s.kv_heads;
        for (std::int64_t b = 0; b < s.batch; ++b)
          for (std::int64_t h = 0; h < s.heads; ++h) {
            const std::int64_t qh = b * s.heads + h, kh = b * s.kv_heads + h / group;
            const auto q_at = qh * s.seq_q * s.head_dim * static_cast<std::int64_t>(element_bytes);
            const auto k_at = kh * s.seq_kv * s.head_dim * static_cast<std::int64_t>(element_bytes);
            const auto at = [](void* base, std::int64_t bytes) { return static_cast<std::byte*>(base) + bytes; };
            peer.run_head(at(data(q, q16), q_at), at(data(k, k16), k_at), at(data(v, v16), k_at),
                          at(data(o_peer, o16_peer), q_at));
          }
      };
      const auto fused = [&] { kernel.run(args); };
      const std::unique_ptr<TorchAttention> torch = TorchAttention::create(s, scale, bf16);
      const auto torch_unfused = [&] {
        torch->run(data(q, q16), data(k, k16), data(v, v16), data(o_torch, o16_torch), threads);
      };
      const int fused_calls = sampling.calibrate(fused), unfused_calls = sampling.calibrate(unfused);
      const int torch_calls = torch ? sampling.calibrate(torch_unfused) : 0;
      std::vector<double> fused_ms, unfused_ms, torch_ms;
      for (int r = 0; r < repeat; ++r) {
        fused_ms.push_back(1e3 * sampling.sample(fused, fused_calls));
        unfused_ms.push_back(1e3 * sampling.sample(unfused, unfused_calls));
        if (torch) torch_ms.push_back(1e3 * sampling.sample(torch_unfused, torch_calls));
      }
      if (bf16)
        for (std::size_t i = 0; i < o.size(); ++i)
          o[i] = from_bf16(o16[i]), o_peer[i] = from_bf16(o16_peer[i]), o_torch[i] = from_bf16(o16_torch[i]);
      // Causal with seq_q > seq_kv (aligned bottom-right): each head's first seq_q - seq_kv rows see no key. tessera
      // defines them as zeros; the peers' −inf masks give NaN (0/0), replaced by those zeros before comparing.
      const std::int64_t masked_rows = s.causal ? std::max<std::int64_t>(0, s.seq_q - s.seq_kv) : 0;
      for (std::vector<float>* peer_o : {&o_peer, &o_torch})
        for (std::size_t i = 0; i < peer_o->size(); ++i)
          if (static_cast<std::int64_t>(i / static_cast<std::size_t>(s.head_dim)) % s.seq_q < masked_rows)
            (*peer_o)[i] = 0;
      // bf16: the peers round the scores and P to bf16, tessera keeps them f32.
      const double tolerance = bf16 ? 3e-2 : 1e-4;
      const double diff = max_rel_diff(o, o_peer), torch_diff = torch ? max_rel_diff(o, o_torch) : 0.0;
      const double ms = median(fused_ms), peer_ms = median(unfused_ms);
      const double gflops = problem.flops() / (ms * 1e6);
      // Bytes a call must move at least: Q, K, V read and O written once.
      const double bytes =
          static_cast<double>(element_bytes) * static_cast<double>(q.size() + k.size() + v.size() + o.size());
      const double gbps = bytes / (ms * 1e6);
      nlohmann::json row{
          {"shape", s.label()},
          {"dtype", dtype_name(dtype)},
          {"batch", s.batch},
          {"heads", s.heads},
          {"kv_heads", s.kv_heads},
          {"seq_q", s.seq_q},
          {"seq_kv", s.seq_kv},
          {"head_dim", s.head_dim},
          {"causal", s.causal},
          {"threads", threads},
          {"kernel", kernel.name()},
          {"tessera_ms", ms},
          {"onednn_unfused_ms", peer_ms},
          {"tessera_gflops", gflops},
          {"onednn_unfused_gflops", problem.flops() / (peer_ms * 1e6)},
          {"speedup_over_unfused", paired_median_ratio(unfused_ms, fused_ms)},
          {"max_rel_diff_vs_unfused", diff},
          {"torch_unfused_ms", torch ? nlohmann::json(median(torch_ms)) : nlohmann::json()},
          {"torch_unfused_gflops",
           torch ? nlohmann::json(problem.flops() / (median(torch_ms) * 1e6)) : nlohmann::json()},
          {"speedup_over_torch", torch ? nlohmann::json(paired_median_ratio(torch_ms, fused_ms)) : nlohmann::json()},
          {"max_rel_diff_vs_torch", torch ? nlohmann::json(torch_diff) : nlohmann::json()},
          {"rows_without_keys", s.batch * s.heads * masked_rows},
          {"torch_unavailable", torch ? nlohmann::json() : nlohmann::json(torch_missing)},
          {"gbps", gbps},
          {"stream_read_gbps", stream[threads]},
          {"fraction_of_stream_read", gbps / stream[threads]},
          {"agrees", diff < tolerance && torch_diff < tolerance}};
      log << fmt::format("{:<26} {:>3} {:>12.3f} {:>12.3f} {:>10.1f} {:>14.2f} {:>10} {:>12} {:>8.1f} {:>7.0f}%\n",
                         s.label(), threads, ms, peer_ms, gflops, row["speedup_over_unfused"].get<double>(),
                         torch ? fmt::format("{:.3f}", median(torch_ms)) : "-",
                         torch ? fmt::format("{:.2f}", row["speedup_over_torch"].get<double>()) : "-", gbps,
                         100 * gbps / stream[threads]);
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace tessera::bench
