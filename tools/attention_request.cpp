#include "attention_request.hpp"

#include <fmt/format.h>

#include <random>

namespace tessera::cli {

namespace {
std::pair<std::string, std::string> split_assignment(const std::string& item, const std::string& option) {
  const auto eq = item.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
    throw InvalidArgument(option, "expects NAME=VALUE, got '" + item + "'");
  return {item.substr(0, eq), item.substr(eq + 1)};
}

std::int64_t parse_extent(const std::string& text, const std::string& option) {
  std::size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || v < 1 || v > (1LL << 31))
    throw InvalidArgument(option, "extent '" + text + "' must be an integer in [1, 2^31]");
  return v;
}
}  // namespace

void add_attention_options(CLI::App& app, AttentionRequest& r) {
  app.add_option("B", r.batch, "batch (with --seq-lens: taken from the list)")->required();
  app.add_option("H", r.heads, "query heads")->required();
  app.add_option("S", r.seq, "query sequence length (with --seq-lens: ignored)")->required();
  app.add_option("D", r.head_dim, "head dimension of Q and K")->required();
  app.add_option("--kv-heads", r.kv_heads, "K and V heads (default H; H must be a multiple)");
  app.add_option("--seq-kv", r.seq_kv, "key sequence length (default S)");
  app.add_option("--head-dim-v", r.head_dim_v, "head dimension of V and O (default D)");
  app.add_option("--seq-lens", r.seq_lens, "variable lengths: query length per batch item, e.g. 100,0,37")
      ->delimiter(',');
  app.add_option("--seq-lens-kv", r.seq_lens_kv, "variable lengths: key length per batch item (default --seq-lens)")
      ->delimiter(',');
  app.add_flag("--causal", r.causal, "query i sees keys j <= i + seq_kv - seq_q");
  app.add_flag("--lse", r.lse, "also write the log-sum-exp of each query row");
  app.add_option("--scale", r.scale, "softmax scale (default 1/sqrt(D))");
  app.add_option("--score-mod", r.score_mod, "e.g. 's - slope[h]*(i - j)', '30*tanh(s/30)', 'j < i - 256 ? -inf : s'");
  app.add_option("--tensor", r.tensors, "a tensor the modifier reads, NAME=AxB (random values)");
  app.add_option("--scalar", r.scalars, "a scalar the modifier reads, NAME=VALUE");
  app.add_option("--layout", r.layout, "bshd or bhsd memory for Q, K, V and O");
  app.add_option("--dtype", r.dtype, "element type of Q, K, V and O: f32 or bf16 (CPU), f16 or bf16 (CUDA)");
  app.add_option("--target", r.target, "cpu, cpu:avx512, cpu:avx2, cuda:sm_XX, cuda-emu:sm_XX");
  app.add_option("--threads", r.threads, "threads to run on (0: all)");
  app.add_option("--config", r.config,
                 "override the default config: block_q=48,block_kv=128,mr=6,nv=4 (CPU); "
                 "block_kv=128,warps=8,wgmma=1,stages=3 (CUDA)");
}

AttentionBuffers make_attention_buffers(const AttentionRequest& r, std::uint32_t seed) {
  if (r.dtype != "f32" && r.dtype != "bf16" && r.dtype != "f16")
    throw InvalidArgument("--dtype", "must be f32, bf16 or f16, got '" + r.dtype + "'");
  if (r.layout != "bshd" && r.layout != "bhsd") throw InvalidArgument("--layout", "must be bshd or bhsd");
  if (r.batch < 0 || r.heads < 0 || r.seq < 0) throw InvalidArgument("B/H/S", "must be >= 0");
  if (r.head_dim < 1 || r.head_dim > 512) throw InvalidArgument("D", "must be in [1, 512]");
  if (r.threads < 0) throw InvalidArgument("--threads", "must be >= 0");
  const bool varlen = !r.seq_lens.empty() || !r.seq_lens_kv.empty();
  if (!r.seq_lens_kv.empty() && r.seq_lens.empty()) throw InvalidArgument("--seq-lens-kv", "needs --seq-lens");
  const std::int64_t kv_heads = r.kv_heads.value_or(r.heads);
  const std::int64_t dv = r.head_dim_v.value_or(r.head_dim);
  if (r.kv_heads && kv_heads < 1) throw InvalidArgument("--kv-heads", "must be >= 1");
  if (dv < 1 || dv > 512) throw InvalidArgument("--head-dim-v", "must be in [1, 512]");
  const std::vector<std::int64_t>& lens_kv = r.seq_lens_kv.empty() ? r.seq_lens : r.seq_lens_kv;
  if (varlen && lens_kv.size() != r.seq_lens.size())
    throw InvalidArgument("--seq-lens-kv",
                          fmt::format("has {} lengths, --seq-lens has {}", lens_kv.size(), r.seq_lens.size()));
  std::int64_t total_q = 0, total_kv = 0;
  for (std::size_t b = 0; b < r.seq_lens.size(); ++b) {
    if (r.seq_lens[b] < 0 || lens_kv[b] < 0) throw InvalidArgument("--seq-lens", "lengths must be >= 0");
    total_q += r.seq_lens[b], total_kv += lens_kv[b];
  }
  const std::int64_t batch = varlen ? 1 : r.batch;
  const std::int64_t sq = varlen ? total_q : r.seq, skv = varlen ? total_kv : r.seq_kv.value_or(r.seq);
  if (skv < 0) throw InvalidArgument("--seq-kv", "must be >= 0");
  const double limit = double(1LL << 31);
  if (double(batch) * double(std::max(r.heads, kv_heads)) * double(std::max(sq, skv)) *
          double(std::max(r.head_dim, dv)) >
      limit)
    throw InvalidArgument("B/H/S/D", "this command allocates at most 2^31 elements per tensor");

  AttentionBuffers buf;
  AttentionArgs& a = buf.args;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const bool bshd = r.layout == "bshd";
  // A dense tensor of [batch, heads, seq, dim] in the chosen memory order (varlen: [total, heads, dim]).
  const auto tensor = [&](std::vector<float>& v, std::int64_t heads, std::int64_t seq, std::int64_t dim, bool random) {
    v.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, batch * heads * seq * dim)));
    if (random)
      for (float& x : v) x = dist(rng);
    Tensor t;
    t.data = v.data();
    if (varlen) {
      t.shape = {seq, heads, dim};
      t.strides = {heads * dim, dim, 1};
    } else {
      t.shape = {batch, heads, seq, dim};
      t.strides = bshd ? std::vector<std::int64_t>{seq * heads * dim, dim, heads * dim, 1}
                       : std::vector<std::int64_t>{heads * seq * dim, seq * dim, dim, 1};
    }
    return t;
  };
  a.q = tensor(buf.q, r.heads, sq, r.head_dim, true);
  a.k = tensor(buf.k, kv_heads, skv, r.head_dim, true);
  a.v = tensor(buf.v, kv_heads, skv, dv, true);
  a.o = tensor(buf.o, r.heads, sq, dv, false);
  if (r.dtype != "f32") {
    // The same random values rounded to 16 bits, viewed with the same shapes and strides.
    const bool bf16 = r.dtype == "bf16";
    const auto narrow = [bf16](std::vector<float>& from, std::vector<std::uint16_t>& to, Tensor& t) {
      to.resize(from.size());
      for (std::size_t i = 0; i < from.size(); ++i) {
        to[i] = bf16 ? to_bf16(from[i]) : to_f16(from[i]);
        from[i] = bf16 ? from_bf16(to[i]) : from_f16(to[i]);
      }
      t.data = to.data();
      t.dtype = bf16 ? DType::bf16 : DType::f16;
    };
    narrow(buf.q, buf.q16, a.q);
    narrow(buf.k, buf.k16, a.k);
    narrow(buf.v, buf.v16, a.v);
    narrow(buf.o, buf.o16, a.o);
  }
  if (r.lse) {
    buf.lse.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, batch * r.heads * sq)));
    a.lse.data = buf.lse.data();
    a.lse.shape = varlen ? std::vector<std::int64_t>{r.heads, sq} : std::vector<std::int64_t>{batch, r.heads, sq};
    a.lse.strides = varlen ? std::vector<std::int64_t>{sq, 1} : std::vector<std::int64_t>{r.heads * sq, sq, 1};
  }
  if (varlen) {
    a.seq_offsets_q = {0};
    a.seq_offsets_kv = {0};
    for (std::size_t b = 0; b < r.seq_lens.size(); ++b) {
      a.seq_offsets_q.push_back(a.seq_offsets_q.back() + r.seq_lens[b]);
      a.seq_offsets_kv.push_back(a.seq_offsets_kv.back() + lens_kv[b]);
    }
  }
  a.causal = r.causal;
  a.scale = r.scale;
  a.threads = r.threads;
  if (!r.score_mod.empty()) a.set_score_mod(r.score_mod);
  for (const std::string& item : r.tensors) {
    const auto [name, dims] = split_assignment(item, "--tensor");
    std::vector<std::int64_t> shape;
    std::size_t start = 0;
    while (start <= dims.size()) {
      const std::size_t x = std::min(dims.find('x', start), dims.size());
      shape.push_back(parse_extent(dims.substr(start, x - start), "--tensor " + name));
      start = x + 1;
    }
    if (shape.size() > 4) throw InvalidArgument("--tensor " + name, "has more than 4 dimensions");
    std::int64_t n = 1;
    for (std::int64_t e : shape) n *= e;
    if (n > (1LL << 31)) throw InvalidArgument("--tensor " + name, "has more than 2^31 elements");
    auto& v = buf.tensors[name];
    v.resize(static_cast<std::size_t>(n));
    for (float& x : v) x = dist(rng);
    Tensor t{v.data(), DType::f32, shape, std::vector<std::int64_t>(shape.size(), 1)};
    for (std::size_t d = shape.size() - 1; d-- > 0;) t.strides[d] = t.strides[d + 1] * shape[d + 1];
    a.tensors[name] = t;
  }
  for (const std::string& item : r.scalars) {
    const auto [name, value] = split_assignment(item, "--scalar");
    std::size_t used = 0;
    float x = 0;
    try {
      x = std::stof(value, &used);
    } catch (const std::exception&) {
    }
    if (used != value.size() || used == 0) throw InvalidArgument("--scalar " + name, "'" + value + "' is not a number");
    a.scalars[name] = x;
  }
  return buf;
}

}  // namespace tessera::cli
