// attention's FP32 reference: causal scaled dot-product attention with grouped kv heads.
//
// q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D] (bf16, upcast exactly), optional key_mask [B, Skv]
// (bool); backward adds dy.o [B, Hq, Sq, D] (bf16). Query head h reads kv head h / (Hq / Hkv).
// Key j is visible to query i iff j <= i + (Skv - Sq) (causal, aligned bottom-right) and
// key_mask[b, j]. With scale = float(1 / sqrt(D)), everything in FP32:
//   s_ij = (q_i . k_j) * scale
//   m_i = max over visible j of s_ij;  e_ij = exp(s_ij - m_i);  p_ij = e_ij / sum_j e_ij
//   o_i = sum_j p_ij v_j
// Backward, dO = dy.o:
//   dP_ij = dO_i . v_j;  Dsum_i = sum_j p_ij dP_ij;  dS_ij = p_ij (dP_ij - Dsum_i)
//   dq_i = scale * sum_j dS_ij k_j
//   dk_j = scale * sum_{h of the group} sum_i dS_ij q_i;  dv_j = sum_{h of the group} sum_i p_ij dO_i
// Every sum over j runs over the visible keys only (an invisible key is skipped, not weighted by
// 0). Orders, each sum from +0 with one multiply and one add per term (no fma): dot products in
// increasing d; the softmax denominator, o, Dsum and dq in increasing j; dk and dv one chain per
// element over the group's query heads in increasing h, and within a head the queries in
// increasing i (dk's scale applied after the sum).
// A query row with no visible key (all its keys masked, or Sq > Skv and i < Sq - Skv) has no
// softmax: as PyTorch, its o and dq rows are NaN, and so are dk and dv of every key of that
// batch (the row's NaN probabilities reach every key of every kv head).
// Outputs o; dq, dk, dv (FP32, the shapes of q, k, v). The token-major layout [T, H, D] is
// refused: the runner lays tokens out per sample as [B, H, S, D] (+ key_mask) before calling.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attention_inputs.hpp"
#include "support.hpp"

namespace ws1::ref {
namespace {

constexpr std::int64_t kLanes = 64;  // keys per tile: the fixed width the dot products vectorise over
constexpr std::int64_t kRows = 16;   // query rows per task: they share each key tile while it is cached
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// How many tiles of kLanes keys hold `keys` keys.
std::int64_t tile_count(std::int64_t keys) { return (keys + kLanes - 1) / kLanes; }

// The shared inputs (attention_inputs.hpp) and what only this reference needs.
struct Inputs : AttentionInputs {
  // Per (b, kv head): k and v as tiles of kLanes keys, tile-major then d then key, zero padded.
  std::vector<std::vector<float>> k_tiles, v_tiles;
};

// The keys of each (b, kv head) transposed into tiles so that one query's products with a
// tile's keys are kLanes independent chains over contiguous memory.
std::vector<std::vector<float>> key_major_tiles(const Inputs& x, const std::vector<float>& rows, unsigned threads) {
  const AttentionDims& n = x.n;
  std::vector<std::vector<float>> out(static_cast<std::size_t>(n.b * n.hkv));
  each_index(n.b * n.hkv, threads, [&](std::int64_t bh) {
    std::vector<float>& t = out[static_cast<std::size_t>(bh)];
    t.assign(static_cast<std::size_t>(tile_count(n.skv) * kLanes * n.d), 0.0f);
    const float* src = rows.data() + bh * n.skv * n.d;
    for (std::int64_t j = 0; j < n.skv; ++j)
      for (std::int64_t e = 0; e < n.d; ++e)
        t[static_cast<std::size_t>(((j / kLanes) * n.d + e) * kLanes + j % kLanes)] = src[j * n.d + e];
  });
  return out;
}

Inputs read_inputs(const Call& call, bool backward) {
  Inputs x{read_attention_inputs(call, backward), {}, {}};
  const unsigned threads = call.ctx().threads;
  x.k_tiles = key_major_tiles(x, x.k, threads);
  if (backward) x.v_tiles = key_major_tiles(x, x.v, threads);
  return x;
}

// The work loops are compiled twice, for AVX2 and for the baseline, chosen at load time: the
// lanes are independent chains and nothing is contracted (-ffp-contract=off), so both give the
// same bits (checked); the AVX2 one is about 1.5x faster.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define WS1_REF_CLONES __attribute__((target_clones("avx2", "default")))
#define WS1_REF_INLINE inline __attribute__((always_inline))
#else
#define WS1_REF_CLONES
#define WS1_REF_INLINE inline
#endif

// out[l] = a . (key l of the tile): one chain per key over d in order from +0. The keys are
// independent, so the fixed-width inner loop vectorises without reordering any chain.
WS1_REF_INLINE void dot_tile(const float* __restrict a, const float* __restrict tile, std::int64_t d,
                             float* __restrict out) {
  float acc[kLanes];
  for (std::int64_t l = 0; l < kLanes; ++l) acc[l] = 0.0f;
  for (std::int64_t e = 0; e < d; ++e) {
    const float ae = a[e];
    const float* row = tile + e * kLanes;
    for (std::int64_t l = 0; l < kLanes; ++l) acc[l] = acc[l] + ae * row[l];
  }
  for (std::int64_t l = 0; l < kLanes; ++l) out[l] = acc[l];
}

// y[e] = y[e] + c * x[e]: one more term of each element's chain. Blocks of a fixed 16 so that
// -O2's cheap vectoriser takes them.
WS1_REF_INLINE void add_scaled(float c, const float* __restrict x, float* __restrict y, std::int64_t d) {
  std::int64_t e = 0;
  for (; e + 16 <= d; e += 16)
    for (std::int64_t l = 0; l < 16; ++l) y[e + l] = y[e + l] + c * x[e + l];
  for (; e < d; ++e) y[e] = y[e] + c * x[e];
}

// A task's block of query rows [i0, i1) of (b, h). p holds, per row, one slot per key up to
// the block's widest causal limit (row stride `width`): the probabilities, 0 at invisible keys.
// m, sum: each row's max and denominator; live: whether the row has a visible key.
struct RowBlock {
  std::int64_t b = 0, h = 0, kvh = 0, i0 = 0, i1 = 0, width = 0;
  std::int64_t first_row = 0;  // (b, h, 0)'s row in q, o, dy, dq
  std::vector<float> p, m, sum;
  std::vector<char> live;
};

std::int64_t row_blocks(const AttentionDims& n) { return n.b * n.hq * ((n.sq + kRows - 1) / kRows); }

WS1_REF_INLINE RowBlock softmax_block(const Inputs& x, std::int64_t task) {
  const AttentionDims& n = x.n;
  const std::int64_t blocks = (n.sq + kRows - 1) / kRows;
  RowBlock r;
  const std::int64_t bh = task / blocks;
  r.b = bh / n.hq;
  r.h = bh % n.hq;
  r.kvh = r.b * n.hkv + r.h / n.group();
  r.first_row = bh * n.sq;
  r.i0 = (task % blocks) * kRows;
  r.i1 = std::min(n.sq, r.i0 + kRows);
  const std::int64_t rows = r.i1 - r.i0;
  r.width = tile_count(n.limit(r.i1 - 1)) * kLanes;
  r.p.assign(static_cast<std::size_t>(rows * r.width), 0.0f);
  r.m.assign(static_cast<std::size_t>(rows), 0.0f);
  r.sum.assign(static_cast<std::size_t>(rows), 0.0f);
  r.live.assign(static_cast<std::size_t>(rows), 0);
  const float* tiles = x.k_tiles[static_cast<std::size_t>(r.kvh)].data();
  // Tile-outer: each tile of keys serves every row of the block while it is in cache.
  for (std::int64_t t = 0; t * kLanes < r.width; ++t)
    for (std::int64_t row = 0; row < rows; ++row)
      if (t * kLanes < n.limit(r.i0 + row))
        dot_tile(x.q.data() + (r.first_row + r.i0 + row) * n.d, tiles + t * n.d * kLanes, n.d,
                 r.p.data() + row * r.width + t * kLanes);
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t i = r.i0 + row, lim = n.limit(i);
    float* s = r.p.data() + row * r.width;
    float m = 0.0f;
    bool any = false;
    for (std::int64_t j = 0; j < lim; ++j) {
      if (!x.visible(r.b, i, j)) continue;
      s[j] = s[j] * x.scale;
      m = any ? std::max(m, s[j]) : s[j];
      any = true;
    }
    float sum = 0.0f;
    for (std::int64_t j = 0; j < lim; ++j) {
      s[j] = x.visible(r.b, i, j) ? std::exp(s[j] - m) : 0.0f;
      sum = sum + s[j];
    }
    for (std::int64_t j = 0; j < r.width; ++j) s[j] = j < lim ? s[j] / sum : 0.0f;
    r.m[static_cast<std::size_t>(row)] = m;
    r.sum[static_cast<std::size_t>(row)] = sum;
    r.live[static_cast<std::size_t>(row)] = any ? 1 : 0;
  }
  return r;
}

// o of one block of query rows: o_i = sum_j p_ij v_j in increasing j (tile-outer keeps each
// row's order and reuses v's rows across the block).
WS1_REF_CLONES
void forward_block(const Inputs& x, std::int64_t task, float* o) {
  const AttentionDims& n = x.n;
  const RowBlock r = softmax_block(x, task);
  const float* v = x.v.data() + r.kvh * n.skv * n.d;
  for (std::int64_t t = 0; t * kLanes < r.width; ++t)
    for (std::int64_t i = r.i0; i < r.i1; ++i) {
      const std::int64_t end = std::min((t + 1) * kLanes, n.limit(i));
      const float* p = r.p.data() + (i - r.i0) * r.width;
      float* out = o + (r.first_row + i) * n.d;
      for (std::int64_t j = t * kLanes; j < end; ++j)
        if (x.visible(r.b, i, j)) add_scaled(p[j], v + j * n.d, out, n.d);
    }
  for (std::int64_t i = r.i0; i < r.i1; ++i)
    if (r.live[static_cast<std::size_t>(i - r.i0)] == 0) std::fill_n(o + (r.first_row + i) * n.d, n.d, kNaN);
}

// Per query row (b, h, i), what the key side recomputes P and dS from.
struct RowStats {
  std::vector<float> max, sum, dsum;
};

// Query side of one block of rows: P, dP, Dsum, dS and dq; the rows' statistics into `stats`.
WS1_REF_CLONES
void query_block(const Inputs& x, std::int64_t task, float* dq, RowStats& stats) {
  const AttentionDims& n = x.n;
  const RowBlock r = softmax_block(x, task);
  const std::int64_t rows = r.i1 - r.i0;
  const float* vt = x.v_tiles[static_cast<std::size_t>(r.kvh)].data();
  const float* k = x.k.data() + r.kvh * n.skv * n.d;
  std::vector<float> ds(static_cast<std::size_t>(rows * r.width), 0.0f);  // dP, then dS
  for (std::int64_t t = 0; t * kLanes < r.width; ++t)
    for (std::int64_t row = 0; row < rows; ++row)
      if (t * kLanes < n.limit(r.i0 + row))
        dot_tile(x.dy.data() + (r.first_row + r.i0 + row) * n.d, vt + t * n.d * kLanes, n.d,
                 ds.data() + row * r.width + t * kLanes);
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t i = r.i0 + row, lim = n.limit(i);
    const float* p = r.p.data() + row * r.width;
    float* d = ds.data() + row * r.width;
    float dsum = 0.0f;
    for (std::int64_t j = 0; j < lim; ++j)
      if (x.visible(r.b, i, j)) dsum = dsum + p[j] * d[j];
    for (std::int64_t j = 0; j < lim; ++j) d[j] = p[j] * (d[j] - dsum);
    const auto at = static_cast<std::size_t>(r.first_row + i);
    stats.max[at] = r.m[static_cast<std::size_t>(row)];
    stats.sum[at] = r.sum[static_cast<std::size_t>(row)];
    stats.dsum[at] = dsum;
  }
  for (std::int64_t t = 0; t * kLanes < r.width; ++t)
    for (std::int64_t i = r.i0; i < r.i1; ++i) {
      const std::int64_t end = std::min((t + 1) * kLanes, n.limit(i));
      const float* d = ds.data() + (i - r.i0) * r.width;
      float* out = dq + (r.first_row + i) * n.d;
      for (std::int64_t j = t * kLanes; j < end; ++j)
        if (x.visible(r.b, i, j)) add_scaled(d[j], k + j * n.d, out, n.d);
    }
  for (std::int64_t i = r.i0; i < r.i1; ++i) {
    float* out = dq + (r.first_row + i) * n.d;
    if (r.live[static_cast<std::size_t>(i - r.i0)] == 0)
      std::fill_n(out, n.d, kNaN);
    else
      for (std::int64_t e = 0; e < n.d; ++e) out[e] = out[e] * x.scale;
  }
}

// Key side of one (b, kv head, tile of keys): P and dS recomputed with the same operations as
// the query side (so the same values), summed into dk and dv over the group's heads in order,
// within a head over the queries in order.
WS1_REF_CLONES
void key_tile(const Inputs& x, std::int64_t task, const RowStats& stats, float* dk, float* dv) {
  const AttentionDims& n = x.n;
  const std::int64_t tiles = tile_count(n.skv);
  const std::int64_t kvh = task / tiles, t = task % tiles, j0 = t * kLanes, b = kvh / n.hkv;
  const std::int64_t lanes = std::min(kLanes, n.skv - j0);
  float* dk_out = dk + (kvh * n.skv + j0) * n.d;
  float* dv_out = dv + (kvh * n.skv + j0) * n.d;
  const float* kt = x.k_tiles[static_cast<std::size_t>(kvh)].data() + t * n.d * kLanes;
  const float* vt = x.v_tiles[static_cast<std::size_t>(kvh)].data() + t * n.d * kLanes;
  float s[kLanes], dp[kLanes];
  for (std::int64_t g = 0; g < n.group(); ++g) {
    const std::int64_t first_row = (b * n.hq + (kvh % n.hkv) * n.group() + g) * n.sq;
    for (std::int64_t i = 0; i < n.sq; ++i) {
      const std::int64_t seen = std::min(lanes, n.limit(i) - j0);
      if (seen <= 0) continue;
      const auto at = static_cast<std::size_t>(first_row + i);
      const float* q = x.q.data() + (first_row + i) * n.d;
      const float* dy = x.dy.data() + (first_row + i) * n.d;
      dot_tile(q, kt, n.d, s);
      dot_tile(dy, vt, n.d, dp);
      for (std::int64_t l = 0; l < seen; ++l) {
        if (!x.visible(b, i, j0 + l)) continue;
        const float p = std::exp(s[l] * x.scale - stats.max[at]) / stats.sum[at];
        add_scaled(p * (dp[l] - stats.dsum[at]), q, dk_out + l * n.d, n.d);
        add_scaled(p, dy, dv_out + l * n.d, n.d);
      }
    }
  }
  for (std::int64_t e = 0; e < lanes * n.d; ++e) dk_out[e] = dk_out[e] * x.scale;
}

// Whether batch b has a query row with no visible key (its dk, dv are then NaN).
std::vector<char> batches_with_empty_rows(const Inputs& x) {
  const AttentionDims& n = x.n;
  std::vector<char> out(static_cast<std::size_t>(n.b), 0);
  for (std::int64_t b = 0; b < n.b; ++b)
    for (std::int64_t i = 0; i < n.sq && out[static_cast<std::size_t>(b)] == 0; ++i) {
      bool any = false;
      for (std::int64_t j = 0; j < n.limit(i) && !any; ++j) any = x.visible(b, i, j);
      out[static_cast<std::size_t>(b)] = any ? 0 : 1;
    }
  return out;
}

}  // namespace

Tensors attention_forward(const Call& call) {
  const Inputs x = read_inputs(call, /*backward=*/false);
  std::vector<float> o(x.q.size(), 0.0f);
  each_index(row_blocks(x.n), call.ctx().threads, [&](std::int64_t task) { forward_block(x, task, o.data()); });
  return {{"o", f32_tensor(x.q_shape, std::move(o))}};
}

Tensors attention_backward(const Call& call) {
  const Inputs x = read_inputs(call, /*backward=*/true);
  const AttentionDims& n = x.n;
  const unsigned threads = call.ctx().threads;
  std::vector<float> dq(x.q.size(), 0.0f), dk(x.k.size(), 0.0f), dv(x.v.size(), 0.0f);
  const auto rows = static_cast<std::size_t>(n.b * n.hq * n.sq);
  RowStats stats{std::vector<float>(rows), std::vector<float>(rows), std::vector<float>(rows)};
  each_index(row_blocks(n), threads, [&](std::int64_t task) { query_block(x, task, dq.data(), stats); });
  const std::vector<char> poisoned = batches_with_empty_rows(x);
  each_index(n.b * n.hkv * tile_count(n.skv), threads, [&](std::int64_t task) {
    const std::int64_t kvh = task / tile_count(n.skv), j0 = (task % tile_count(n.skv)) * kLanes;
    if (poisoned[static_cast<std::size_t>(kvh / n.hkv)] == 0) {
      key_tile(x, task, stats, dk.data(), dv.data());
    } else {  // PyTorch's NaN row reaches every key of the batch
      const std::int64_t count = std::min(kLanes, n.skv - j0) * n.d;
      std::fill_n(dk.data() + (kvh * n.skv + j0) * n.d, count, kNaN);
      std::fill_n(dv.data() + (kvh * n.skv + j0) * n.d, count, kNaN);
    }
  });
  return {{"dq", f32_tensor(x.q_shape, std::move(dq))},
          {"dk", f32_tensor(x.kv_shape, std::move(dk))},
          {"dv", f32_tensor(x.kv_shape, std::move(dv))}};
}

}  // namespace ws1::ref
