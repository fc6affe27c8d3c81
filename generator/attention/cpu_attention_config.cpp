#include "generator/attention/cpu_attention_config.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "generator/attention/attention_json.hpp"
#include "generator/core/arith.hpp"
#include "generator/core/config_fields.hpp"
#include "generator/core/error.hpp"

namespace tessera {

namespace {
// Query rows per head up to which the default reads keys in place on every target (decoding and short continuations;
// more where measured, in default_for).
constexpr std::int64_t kInPlaceRows = 8;
// Stacked rows (query heads × positions of a KV head) up to which a stacked block reads its keys in place, and up to
// which a packed one stays stacked.
constexpr std::int64_t kInPlaceStackedRows = 24;
constexpr std::int64_t kStackedPackedRows = 64;
// Query rows of a head up to which a packed block takes them all where its keys come from memory (see default_for).
constexpr std::int64_t kOneBlockRows = 256;
// Stacked rows from which bf16 runs on AMX tiles rather than in place, where the host has them.
constexpr std::int64_t kAmxStackedRows = 8;
}  // namespace

std::int64_t CpuAttentionConfig::packed_head_dim_qk(const AttentionSignature& s) const {
  return amx != kAmxNone ? round_up(s.head_dim_qk, 32) : s.head_dim_qk;
}

std::int64_t CpuAttentionConfig::q_area_floats(const AttentionSignature& s) const {
  return std::int64_t{block_q} * std::max(s.head_dim_qk, ceil_div(packed_head_dim_qk(s), 2));
}

std::int64_t CpuAttentionConfig::k_area_floats(const AttentionSignature& s) const {
  return std::int64_t{block_kv} * std::max(s.head_dim_qk, ceil_div(packed_head_dim_qk(s), 2));
}

std::int64_t CpuAttentionConfig::packed_block_floats(const AttentionSignature& s, const CpuTarget& target) const {
  return round_up(k_area_floats(s) + std::int64_t{block_kv} * round_up(s.head_dim_v, nr(target)), 16);
}

std::int64_t CpuAttentionConfig::workspace_bytes(const AttentionSignature& s, const CpuTarget& target) const {
  const std::int64_t n = nr(target);
  const std::int64_t dv = round_up(s.head_dim_v, n);
  const std::int64_t floats = q_area_floats(s) + k_area_floats(s) + std::int64_t{block_kv} * dv +
                              std::int64_t{block_q} * block_kv * 3 / 2 + std::int64_t{block_q} * dv +
                              5 * std::int64_t{block_q};
  return round_up(floats * 4, 64) + 64 * 10;  // each of the ten areas starts on a cache line
}

int tile_vector_registers(int mr, int nv) { return mr * nv + (mr > 1 ? nv : 0) + 1; }

bool keys_outgrow_l2(const AttentionProblem& problem, const CpuTarget& target) {
  const AttentionSignature& s = problem.signature;
  std::int64_t longest_kv = problem.seq_kv;
  for (std::int64_t len : problem.seq_lens_kv) longest_kv = std::max(longest_kv, len);
  const std::int64_t element_bytes = s.dtype == DType::f32 ? 4 : 2;
  return longest_kv * (s.head_dim_qk + s.head_dim_v) * element_bytes > 2 * target.l2_bytes;
}

CpuAttentionConfig CpuAttentionConfig::default_for(const AttentionProblem& problem, const CpuTarget& target) {
  CpuAttentionConfig c;
  // Accumulators fill three quarters of the vector registers: 6×4 of 32 (AVX-512), 6×2 of 16 (AVX2).
  c.mr = 6;
  c.nv = target.vector_registers() == 32 ? 4 : 2;
  const int nr = c.nr(target);
  // 16 tiles of query rows against 256 keys: the per-row softmax work and the rescale of O are paid once per 256
  // keys, and the scores, Q and O blocks (about 200 KiB at d = 128) stay in L2. (1 thread, 4 heads of 2048, Zen 4:
  // 48×128 ran d = 64 at 83-89 GFLOP/s and d = 128 at 98; 96×256 at 91-93 and 98-100; AVX2 the same way.) Shorter
  // sequences take fewer rows so that small problems still give every thread a task.
  std::int64_t longest_q = problem.seq_q;
  for (std::int64_t len : problem.seq_lens_q) longest_q = std::max(longest_q, len);
  c.block_q = static_cast<int>(std::clamp<std::int64_t>(round_up(longest_q, c.mr), c.mr, 16 * c.mr));
  c.block_kv = static_cast<int>(round_up(256, nr));
  // Decoding: a handful of rows per head reads each key once, from memory; reading it in place reads it once
  // instead of three times (read, write packed, read packed).
  // Grouped-query decoding (a few queries per sequence) stacks a KV head's query heads as the rows of one block.
  const AttentionSignature& s = problem.signature;
  std::int64_t rows = longest_q;
  if (longest_q <= kStackedPositions && problem.kv_heads > 0 && problem.heads > problem.kv_heads)
    rows = problem.heads / problem.kv_heads * longest_q;
  bool stacked = rows > longest_q;
  // A tall stacked block is packed (below) unless its keys come from memory: f32 rows of d ≥ 128 whose K and V
  // outgrow twice the L2 are read once in place, where packing writes and reads them again (Zen 4, 32 query heads on
  // one KV head, d 128, 4-row tiles, in place ÷ packed: 32768 keys 9.6-10.1 against 10.8-12.0 ms on one thread, 4.2-4.7
  // against 5.5-6.3 on two; 8192 keys 1.9 against 2.9-3.0 on one, 1.1-1.2 against 0.9-1.4 on two; 4 × 4096 keys 3.2-4.2
  // against 4.2-4.9 on one; 2048 keys (twice the L2) and d 64 are faster packed).
  const bool keys_from_memory = s.dtype == DType::f32 && s.head_dim_qk >= 128 && s.q_unit_d && s.k_unit_d &&
                                s.v_unit_d && keys_outgrow_l2(problem, target) && rows <= kStackedPackedRows;
  if (stacked && rows > kInPlaceStackedRows && !keys_from_memory) {
    // A tall stacked block is compute-bound: packed tiles of 4 rows, V's vectors unpadded, beat reading keys in place;
    // past kStackedPackedRows the heads unstacked, each in blocks of its own, beat one block. (Zen 4, the attention
    // holdout's decoding cases on 1 and 2 threads: 32 and 40 rows packed 21% and 19% faster than in place; 112, 130
    // and 176 rows fastest in blocks of 8-64 rows, 43-61% faster than one block; 20 rows and fewer fastest in place.
    // The AMX Xeon, fresh seeds: every pick this changed is faster, 0-5% from the best but for 26 heads of 5 queries on
    // one KV head, 31-55%.)
    c.mr = 4;
    c.nv = static_cast<int>(std::clamp<std::int64_t>(ceil_div(s.head_dim_v, target.vector_lanes()), 1, c.nv));
    if (rows > kStackedPackedRows) {
      stacked = false;
      rows = longest_q;
      // Tiles of 6 rows where they pad less than 4 (5 and 6 queries a head; the AMX Xeon, 26 heads of 5 queries on
      // one KV head × 3373 keys, d 64: 1.36 -> 0.95 ms on one thread, 0.68 -> 0.62 on two).
      if (round_up(longest_q, 6) < round_up(longest_q, c.mr)) c.mr = 6;
      c.block_q = static_cast<int>(std::clamp<std::int64_t>(round_up(longest_q, c.mr), c.mr, kStackedPackedRows));
    } else {
      c.block_q = static_cast<int>(round_up(rows, c.mr));
    }
  } else {
    if (stacked && rows > kInPlaceRows)
      c.block_q = static_cast<int>(std::min<std::int64_t>(round_up(rows, c.mr), round_down(512, c.mr)));
    // A stacked block of more rows still reads its keys in place: each key is read from memory once for the block and
    // from L1 by its other row tiles. Tiles of at most 4 rows, the fewest padded rows (Zen 4, one thread, d 128:
    // 2×64/8 heads, 4 and 8 queries against 4096 keys, causal, 13.2 and 25.5 ms in place, 22.3 and 31.3 packed,
    // 14.2 and 28.4 in tiles of 8 rows; 32 heads of 6 queries × 8192 keys: 18.2 ms in tiles of 3, 20.5 of 6).
    // One head's rows (not stacked) read their keys in place where they are few: packing K and V for so few rows
    // costs as much as their products. bf16 on AMX keeps its tiles. (Zen 4, 8 heads, in place ÷ packed: AVX-512 f32
    // 12-32 rows against 512-32768 keys 1.08-1.90× at d 128 on 1 and 2 threads, 1.23-1.62× at d 64; 64 rows 1.11-1.12×
    // from 2048 keys at d 128, 0.93× at 512 keys, 0.91× at d 64; bf16 16 rows 1.38×, 32 rows 0.99×. Zen 3, AVX2, d 128:
    // 16 rows against 8192-32768 keys 1.09-1.15× on one thread, 1.13× on two, against 4096 keys 0.90-1.07× (noise),
    // against 1024 keys 0.83×; 32 rows 0.64-0.78×.)
    const bool wide = target.vector_registers() == 32;
    const std::int64_t query_rows_in_place = target.amx && s.dtype == DType::bf16 ? kInPlaceRows
                                             : wide                               ? (keys_from_memory ? 64 : 32)
                                             : keys_from_memory                   ? 16
                                                                                  : kInPlaceRows;
    if ((rows <= query_rows_in_place || stacked) && s.q_unit_d && s.k_unit_d && s.v_unit_d) {
      c.in_place = true;
      c.mr = static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(rows, 4)));
      for (int mr : {3, 2})
        if (round_up(rows, mr) < round_up(rows, c.mr)) c.mr = mr;
      c.block_q = static_cast<int>(std::min<std::int64_t>(round_up(rows, c.mr), round_down(512, c.mr)));
      // A V row whole per tile where the registers allow it: each row is then read once, in order.
      // Else the fewest padded vectors (the widest such tile): 4 of 8 vectors over 2 slivers, not 6 over 2 (12).
      const int row_vectors = static_cast<int>(ceil_div(s.head_dim_v, target.vector_lanes()));
      int widest = std::min(8, row_vectors);
      while (tile_vector_registers(c.mr, widest) > target.vector_registers()) --widest;
      c.nv = widest;
      for (int nv = widest; nv >= 1; --nv)
        if (round_up(row_vectors, nv) < round_up(row_vectors, c.nv)) c.nv = nv;
      c.block_kv = static_cast<int>(round_up(256, c.nr(target)));
      // Into L2 on the cores measured to prefer it: Zen 4 (the AVX-512 core that splits each 512-bit FMA in halves) and
      // Intel's (the AMX Xeon, one thread, 32 heads × 4096 keys d128: f32 24.7 -> 8.5 ms, bf16 12.4 -> 3.7; GQA 32/8 ×
      // 32768 bf16 52.7 -> 23.6); NTA on Zen 5 (the tuner times both everywhere).
      c.prefetch_l2 = target.intel || (target.isa == CpuIsa::Avx512 && target.vector_fmas_per_cycle == 1);
    }
  }
  // A head of at most kOneBlockRows query rows whose keys come from memory: one block. Keys packed once for several
  // blocks per head are written for every head before the first block runs, and are gone from L3 when the blocks read
  // them (Zen 4, 8 heads, d 128, one block ÷ 96-row blocks: 128 rows × 4096 keys 1.64× on one thread, 1.90× on two;
  // × 16384 keys 1.57×; 256 rows × 4096 and 16384 keys 1.33×, 1.32×; d 64 and bf16, 128 rows × 8192 keys 1.64×,
  // 1.70×; 200 rows × 2048 keys, within twice the L2, 0.99×).
  if (!c.in_place && !stacked && longest_q <= kOneBlockRows && keys_outgrow_l2(problem, target))
    c.block_q = static_cast<int>(round_up(longest_q, c.mr));
  CpuAttentionConfig tiles = c;
  tiles.amx = kAmxTiles;
  if (target.amx && stacked && c.in_place && rows >= kAmxStackedRows) {
    // A stacked block of 8-24 rows read in place is compute-bound on vector FMAs, on AMX tiles it is not: one tile of
    // 16 rows (or 32) against 32 keys or columns, the keys packed. (The AMX Xeon, bf16, d 64 and 128, 1 and 2 threads:
    // 8 rows 1.0-1.35x, 12-24 rows 1.75-2.3x faster than in place; 4 and 6 rows 15-20% slower.)
    tiles.in_place = false, tiles.prefetch_l2 = false;
    if (tiles.grouped(s, target)) {
      tiles.mr = rows <= 16 ? 16 : 32, tiles.nv = 32 / target.vector_lanes();
      tiles.block_q = static_cast<int>(round_up(rows, tiles.mr));
      tiles.block_kv = 256;
      return tiles;
    }
  }
  if (target.amx && tiles.grouped(s, target)) {
    // bf16 on AMX: 32 query rows × 32 keys or columns a tile product (4 accumulator tiles of 8), blocks of 256 keys.
    tiles.mr = 32, tiles.nv = 32 / target.vector_lanes();
    tiles.block_q = static_cast<int>(std::clamp<std::int64_t>(round_up(rows, 32), 32, 128));
    tiles.block_kv = 256;
    return tiles;
  }
  return c;
}

namespace {
const ConfigFields<CpuAttentionConfig>& attention_fields() {
  static const ConfigFields<CpuAttentionConfig> fields{{"block_q", &CpuAttentionConfig::block_q},
                                                       {"block_kv", &CpuAttentionConfig::block_kv},
                                                       {"mr", &CpuAttentionConfig::mr},
                                                       {"nv", &CpuAttentionConfig::nv},
                                                       {"in_place", &CpuAttentionConfig::in_place},
                                                       {"prefetch_l2", &CpuAttentionConfig::prefetch_l2},
                                                       {"amx", &CpuAttentionConfig::amx, true}};
  return fields;
}
}  // namespace

CpuAttentionConfig CpuAttentionConfig::with_overrides(const std::string& text) const {
  return with_config_overrides(*this, text, attention_fields());
}

nlohmann::json to_json(const CpuAttentionConfig& config) { return config_fields_to_json(config, attention_fields()); }

template <>
CpuAttentionConfig from_json<CpuAttentionConfig>(const nlohmann::json& j) {
  return config_fields_from_json(j, attention_fields());
}

bool stacks_query_heads(const AttentionProblem& p, int block_q) {
  std::int64_t longest = 0;
  for (std::int64_t b = 0; b < p.batch; ++b) longest = std::max(longest, p.q_len(b));
  return stacks_query_heads(p.heads, p.kv_heads, longest, block_q);
}

void validate(const AttentionSignature& signature, const CpuAttentionConfig& c, const CpuTarget& target) {
  signature.check();
  if (signature.dtype != DType::f32 && signature.dtype != DType::bf16)
    throw ConfigError(
        fmt::format("the CPU attention kernel takes f32 or bf16 tensors, not {}", dtype_name(signature.dtype)));
  if (c.nv < 1 || c.nv > 8) throw ConfigError(fmt::format("nv = {} must be in [1, 8]", c.nv));
  if (c.amx != CpuAttentionConfig::kAmxNone) {
    if (c.amx != CpuAttentionConfig::kAmxTiles && c.amx != CpuAttentionConfig::kAmxEmulated)
      throw ConfigError(fmt::format("amx = {} must be 0 (vector registers), 1 (AMX tiles) or 2 (AMX emulated)", c.amx));
    if (!c.grouped(signature, target))
      throw ConfigError(
          "AMX attention multiplies bf16 pairs: bf16 tensors with unit head-dimension strides, packed (not in_place), "
          "on a target with avx512_bf16");
    if (c.amx == CpuAttentionConfig::kAmxTiles && !target.amx)
      throw ConfigError(fmt::format("AMX tiles need amx_tile and amx_bf16, which {} lacks ({})", target.str(),
                                    CpuTarget::host_amx_missing()));
    const int nr = c.nr(target);
    if ((c.mr != 16 && c.mr != 32) || nr % 16 != 0)
      throw ConfigError(
          fmt::format("AMX tiles of {}×{}: mr must be 16 or 32 and nr a multiple of 16 (tiles of 16 rows)", c.mr, nr));
    const int a_tiles = c.mr / 16, b_tiles = nr / 16;
    if (a_tiles * b_tiles + a_tiles + b_tiles > 8)
      throw ConfigError(fmt::format("AMX tiles of {}×{} need {} tile registers; AMX has 8", c.mr, nr,
                                    a_tiles * b_tiles + a_tiles + b_tiles));
    if (c.block_kv % 32 != 0)
      throw ConfigError(
          fmt::format("block_kv = {} of an AMX kernel must be a multiple of 32 (a tile row of keys)", c.block_kv));
  } else {
    if (c.mr < 1 || c.mr > 16) throw ConfigError(fmt::format("mr = {} must be in [1, 16]", c.mr));
    if (tile_vector_registers(c.mr, c.nv) > target.vector_registers())
      throw ConfigError(fmt::format("a {}×{} tile needs {} vector registers; {} has {}", c.mr, c.nv,
                                    tile_vector_registers(c.mr, c.nv), target.str(), target.vector_registers()));
  }
  if (c.in_place && !(signature.q_unit_d && signature.k_unit_d && signature.v_unit_d))
    throw ConfigError("in_place reads Q, K and V along their head dimension: it needs a unit stride there");
  if (c.block_q < c.mr || c.block_q % c.mr != 0 || c.block_q > 512)
    throw ConfigError(fmt::format("block_q = {} must be a multiple of mr = {}, at most 512", c.block_q, c.mr));
  const int nr = c.nr(target);
  if (c.block_kv < nr || c.block_kv % nr != 0 || c.block_kv > 2048)
    throw ConfigError(fmt::format("block_kv = {} must be a multiple of nr = {}, at most 2048", c.block_kv, nr));
}

std::vector<CpuAttentionConfig> cpu_attention_variants(const AttentionProblem& problem, const CpuTarget& target) {
  const CpuAttentionConfig first = CpuAttentionConfig::default_for(problem, target);
  std::vector<CpuAttentionConfig> out{first};
  const auto add = [&](CpuAttentionConfig c) {
    try {
      validate(problem.signature, c, target);
    } catch (const ConfigError&) {
      return;
    }
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  };
  const int lanes = target.vector_lanes();
  for (const auto& [mr, nv] : std::vector<std::pair<int, int>>{{6, 4}, {8, 3}, {4, 4}, {6, 2}, {4, 2}, {3, 4}})
    for (int q_tiles : {4, 8, 16})
      for (int kv_keys : {64, 128, 256}) {
        CpuAttentionConfig c;
        c.mr = mr, c.nv = nv;
        c.block_q = std::min<int>(q_tiles * mr, static_cast<int>(round_up(std::max(first.block_q, mr), mr)));
        c.block_kv = static_cast<int>(round_up(kv_keys, nv * lanes));
        add(c);
      }
  if (target.amx) {
    // AMX tiles: 32×32 products over the block sizes, and the two narrower tile shapes at 256 keys.
    CpuAttentionConfig tiles = first;
    tiles.amx = CpuAttentionConfig::kAmxTiles, tiles.in_place = false, tiles.prefetch_l2 = false;
    const auto add_tiles = [&](int mr, int nr, int q_rows, int kv_keys) {
      tiles.mr = mr, tiles.nv = nr / lanes;
      tiles.block_q = std::min<int>(q_rows, static_cast<int>(round_up(std::max(first.block_q, mr), mr)));
      tiles.block_kv = kv_keys;
      add(tiles);
    };
    for (int q_rows : {32, 64, 128, 256})
      for (int kv_keys : {128, 256, 512}) add_tiles(32, 32, q_rows, kv_keys);
    for (int q_rows : {32, 64, 128}) add_tiles(16, 32, q_rows, 256);
    add_tiles(32, 16, 128, 256);
  }
  if (first.in_place)
    for (bool prefetch_l2 : {first.prefetch_l2, !first.prefetch_l2})
      for (int nv : {2, 4, 8}) {
        CpuAttentionConfig c = first;
        c.nv = nv;
        c.prefetch_l2 = prefetch_l2;
        for (int keys : {128, 256, 512}) {
          c.block_kv = static_cast<int>(round_up(keys, nv * lanes));
          add(c);
        }
      }
  return out;
}

}  // namespace tessera
