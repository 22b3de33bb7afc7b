// attention (DESIGN §6, NOTES §c): scaled dot-product attention, causal, GQA.
//
// Inputs (head-major): q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D], all bf16; optional
// key_mask [B, Skv] bool (true = valid key; bytes must be 0 or 1); backward also dy.o
// [B, Hq, Sq, D] bf16. Output o [B, Hq, Sq, D]; gradients dq, dk, dv (shapes of q, k, v).
// The token-major invariance fixture (q [T, Hq, D], k/v [T, Hkv, D]) is refused with a message:
// the runner lays its tokens out per sample as [B, H, S, D] (+ key_mask) before calling.
//
// Definition: query head h reads kv head h / (Hq / Hkv) (Qwen3-8B: 32 / 8 -> h / 4; the group
// comes from the shapes, OpContext's head counts are not consulted);
// scale = 1/sqrt(D) (float32 rounding of the double value); s_ij = (q_i . k_j) * scale;
// key j is visible to query i iff key_mask[b, j] and j <= i + (Skv - Sq) (causal mask aligned
// bottom-right: prefill Sq == Skv, decode Sq = 1 against a KV cache of Skv, chunked prefill
// in between); p = softmax over the visible keys (FP32, max-subtracted); o_i = sum_j p_ij v_j.
// Dot products over d are FP32 fused multiply-add chains in d order from +0 (std::fma: this
// library is built with -ffp-contract=off). exp and log are the C library's float expf/logf
// (a bit-exact CUDA twin needs the same functions).
//
// A query row with no visible key: the reference gives NaN (as PyTorch: the row's o, its dq,
// and dk/dv of every key of that kv head in that batch); the candidate gives o = 0 and no
// gradient contribution (the runner does not feed such rows to accuracy).
//
// The FP32 reference (spec §3.1) is lib/ref/attention.cpp.
//
// cpu_bf16 candidate (a flash-attention forward, one query row at a time):
// - The keys of a (batch, kv head) are its VALID keys in index order (what a varlen kernel sees
//   after unpadding), cut into fixed tiles of 64: tile t holds valid keys of rank [64t, 64t+64).
//   Query i visits the tiles up to its last visible key; the tile boundaries depend neither on
//   Sq, nor on padding, nor on the thread count, so a decode row (Sq = 1), the same row inside a
//   prefill or a chunked prefill, and the same row under left or right padding give the same
//   bits. Invisible keys contribute nothing (they are skipped, not multiplied by 0).
// - Per tile, in order: s = dot * scale; m_new = max(m, max_tile s); alpha = exp(m - m_new)
//   (m starts at -inf, so alpha = 0 on the first tile); p_j = exp(s_j - m_new);
//   tile_sum = sum p_j and pv = sum p_j v_j, both from +0 in key order (pv by fma);
//   l = fma(l, alpha, tile_sum); acc = fma(acc, alpha, pv) per d. P stays FP32.
// - o = acc / l rounded to bf16 once; LSE = m + log(l) in FP32 (+inf for a row without keys).
// Candidate backward (deterministic, no order that depends on threads):
// - recompute the forward rows (bitwise the forward's FP32 o and LSE); Dsum_i = dO_i . o_i
//   (FP32 o, fma in d order);
// - P_ij = exp(s_ij - LSE_i) recomputed per tile; dP_ij = dO_i . v_j (fma chain in d order);
//   dS_ij = P_ij * (dP_ij - Dsum_i);
// - dq_i: fma over the visible keys in key order from +0, then * scale;
// - dk_j, dv_j: per query head of the group, a partial accumulated by fma over the queries in
//   index order from +0; the partials summed in head order (from +0); dk then * scale.
// - dq, dk, dv rounded to bf16 once. Keys that are masked out get dk = dv = 0.
// Padding: a right-padded query row sees the valid keys, so its dy reaches dk/dv; the runner
// gives pad rows dy = 0, which makes their contributions exact zeros (the bits of the active
// keys then equal the unpadded run's, up to a -0 partial turning +0).
// Threads (parallel_for) split independent outputs only: (b, h, block of 64 query rows) for o
// and dq, (b, kv head, key tile) for dk and dv.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "op_support.hpp"
#include "ws1/numeric.hpp"
#include "ws1/op_inputs.hpp"

// The kernels (dot_lanes, combine_rows, scatter_rows, rescale_add) are compiled twice: with
// FMA + AVX (the fma chains vectorise across independent lanes) and for the baseline (std::fma
// through libm), chosen at load time. Both give the same bits: every fma is correctly rounded
// and each lane keeps its order.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define WS1_ATTENTION_CLONES __attribute__((target_clones("fma", "default")))
#define WS1_ATTENTION_INLINE inline __attribute__((always_inline))
#else
#define WS1_ATTENTION_CLONES
#define WS1_ATTENTION_INLINE inline
#endif

namespace ws1::ops {
namespace {

const Tensor& head_major(const Tensors& in, std::string_view name) {
  const Tensor& t = input(in, kAttentionOp, name, DType::kBF16);
  require(t.dim() != 3, kAttentionOp, name,
          fmt::format("shape {} is the token-major invariance layout [T, H, D]; attention takes "
                      "head-major [B, H, S, D] (the runner lays the tokens out per sample)",
                      shape_string(t.shape())));
  require(t.dim() == 4, kAttentionOp, name,
          fmt::format("shape {} (expected rank 4, [B, H, S, D])", shape_string(t.shape())));
  return t;
}

}  // namespace

// Shared with the cuda_bf16 host function (ws1/op_inputs.hpp): same checks, same messages.
AttentionInputs check_attention_inputs(const Tensors& in, bool backward) {
  constexpr std::string_view kOp = kAttentionOp;
  AttentionInputs x;
  x.q = &head_major(in, "q");
  x.k = &head_major(in, "k");
  x.v = &head_major(in, "v");
  const Tensor& qt = *x.q;
  const Tensor& kt = *x.k;
  const Tensor& vt = *x.v;
  AttentionDims& n = x.n;
  n.b = qt.shape()[0];
  n.hq = qt.shape()[1];
  n.sq = qt.shape()[2];
  n.d = qt.shape()[3];
  n.hkv = kt.shape()[1];
  n.skv = kt.shape()[2];
  require(n.d >= 1, kOp, "q", fmt::format("shape {}: head_dim must be at least 1", shape_string(qt.shape())));
  require(vt.shape() == kt.shape(), kOp, "v",
          fmt::format("shape {} differs from k {}", shape_string(vt.shape()), shape_string(kt.shape())));
  require(kt.shape()[0] == n.b && kt.shape()[3] == n.d, kOp, "k",
          fmt::format("shape {} does not fit q {} (batch and head_dim must agree)",
                      shape_string(kt.shape()), shape_string(qt.shape())));
  require(n.hkv >= 1 && n.hq >= 1 && n.hq % n.hkv == 0, kOp, "k",
          fmt::format("{} kv heads for {} query heads (the query heads must be a positive "
                      "multiple of the kv heads)", n.hkv, n.hq));
  x.valid.assign(static_cast<std::size_t>(n.b * n.skv), 1);
  if (find_tensor(in, "key_mask") != nullptr) {
    const Tensor& mt = input(in, kOp, "key_mask", DType::kBool);
    require(mt.shape() == Shape{n.b, n.skv}, kOp, "key_mask",
            fmt::format("shape {} (expected [B, Skv] = [{}, {}])", shape_string(mt.shape()), n.b, n.skv));
    const Tensor m = mt.is_contiguous() ? mt : mt.contiguous();
    const auto* bits = m.data<std::uint8_t>();
    for (std::size_t i = 0; i < x.valid.size(); ++i) {
      require(bits[i] <= 1, kOp, "key_mask",
              fmt::format("element {} holds byte {} (a bool must be 0 or 1)", i, bits[i]));
      x.valid[i] = bits[i];
    }
  }
  if (backward) {
    x.dy = &input(in, kOp, "dy.o", DType::kBF16);
    require(x.dy->shape() == qt.shape(), kOp, "dy.o",
            fmt::format("shape {} differs from q {}", shape_string(x.dy->shape()), shape_string(qt.shape())));
  }
  x.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(n.d)));
  return x;
}

namespace {

constexpr std::int64_t kTile = 64;   // keys per tile (candidate), lanes per kernel call
constexpr std::int64_t kQueryBlock = 64;  // query rows per task
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr std::string_view kOp = kAttentionOp;

// ---- inputs ---------------------------------------------------------------------------------

using Dims = AttentionDims;

struct Inputs {
  Dims n;
  Shape q_shape, kv_shape;
  std::vector<float> q, k, v, dy;  // row-major upcasts
  std::vector<std::uint8_t> valid;  // [B, Skv]: 1 = key may be attended to
  float scale = 1.0f;
};

Inputs read_inputs(const Tensors& in, bool backward) {
  AttentionInputs c = check_attention_inputs(in, backward);
  Inputs x;
  x.n = c.n;
  x.q_shape = c.q->shape();
  x.kv_shape = c.k->shape();
  x.q = to_f32(*c.q);
  x.k = to_f32(*c.k);
  x.v = to_f32(*c.v);
  x.valid = std::move(c.valid);
  if (backward) x.dy = to_f32(*c.dy);
  x.scale = c.scale;
  return x;
}

// ---- kernels ----------------------------------------------------------------------------------

// A list of keys of one (batch, kv head), in index order, transposed into 64-lane tiles for the
// lane kernel: kT[t][d][lane] (zero past the list's end); vT likewise when asked for.
struct KeyTiles {
  std::vector<std::int64_t> index;  // absolute key position of each list entry
  std::vector<float> kT, vT;
  std::int64_t tiles() const { return (static_cast<std::int64_t>(index.size()) + kTile - 1) / kTile; }
};

KeyTiles make_tiles(std::vector<std::int64_t> index, const float* k, const float* v, std::int64_t d,
                    bool with_v) {
  KeyTiles t;
  t.index = std::move(index);
  const auto size = static_cast<std::size_t>(t.tiles() * d * kTile);
  t.kT.assign(size, 0.0f);
  if (with_v) t.vT.assign(size, 0.0f);
  for (std::size_t r = 0; r < t.index.size(); ++r) {
    const auto tile = static_cast<std::int64_t>(r) / kTile, lane = static_cast<std::int64_t>(r) % kTile;
    const std::int64_t j = t.index[r];
    for (std::int64_t e = 0; e < d; ++e) {
      const auto at = static_cast<std::size_t>((tile * d + e) * kTile + lane);
      t.kT[at] = k[j * d + e];
      if (with_v) t.vT[at] = v[j * d + e];
    }
  }
  return t;
}

// The kernels: all the inner work, each compiled for both targets (see the top).

// out[l] = sum_e a[e] * tile[e][l] for the 64 lanes: one fma chain per lane, e in order, from +0.
// Lanes are independent, so they vectorise without changing any lane's order.
WS1_ATTENTION_CLONES
void dot_lanes(const float* __restrict a, const float* __restrict tile, std::int64_t d,
               float* __restrict out) {
  float acc[kTile] = {};
  for (std::int64_t e = 0; e < d; ++e) {
    const float ae = a[e];
    const float* row = tile + e * kTile;
    for (std::int64_t l = 0; l < kTile; ++l) acc[l] = std::fma(ae, row[l], acc[l]);
  }
  for (std::int64_t l = 0; l < kTile; ++l) out[l] = acc[l];
}

// y[e] = fma(a, x[e], y[e]) for every e: independent per e (16-wide blocks vectorise).
WS1_ATTENTION_INLINE void axpy(float a, const float* __restrict x, float* __restrict y,
                               std::int64_t d) {
  std::int64_t e = 0;
  for (; e + 16 <= d; e += 16)
    for (std::int64_t l = 0; l < 16; ++l) y[e + l] = std::fma(a, x[e + l], y[e + l]);
  for (; e < d; ++e) y[e] = std::fma(a, x[e], y[e]);
}

// out += coef[j] * rows[index[j]] for j = 0, 1, ... in order (one fma per element and term).
WS1_ATTENTION_CLONES
void combine_rows(const float* __restrict coef, std::int64_t count, const float* __restrict rows,
                  const std::int64_t* __restrict index, std::int64_t d, float* __restrict out) {
  for (std::int64_t j = 0; j < count; ++j) axpy(coef[j], rows + index[j] * d, out, d);
}

// out_j += coef[j] * x for the `count` consecutive rows out_j (one fma per element).
WS1_ATTENTION_CLONES
void scatter_rows(const float* __restrict coef, std::int64_t count, const float* __restrict x,
                  std::int64_t d, float* __restrict out) {
  for (std::int64_t j = 0; j < count; ++j) axpy(coef[j], x, out + j * d, d);
}

// acc[e] = fma(acc[e], alpha, add[e]): the online-softmax rescale.
WS1_ATTENTION_CLONES
void rescale_add(float* __restrict acc, float alpha, const float* __restrict add, std::int64_t d) {
  std::int64_t e = 0;
  for (; e + 16 <= d; e += 16)
    for (std::int64_t l = 0; l < 16; ++l) acc[e + l] = std::fma(acc[e + l], alpha, add[e + l]);
  for (; e < d; ++e) acc[e] = std::fma(acc[e], alpha, add[e]);
}

float dot(const float* a, const float* b, std::int64_t d) {
  float acc = 0.0f;
  for (std::int64_t e = 0; e < d; ++e) acc = std::fma(a[e], b[e], acc);
  return acc;
}

// Builds one KeyTiles per (b, kv head) over its valid keys.
std::vector<KeyTiles> key_tiles(const Inputs& x, bool with_v, unsigned threads) {
  const Dims& n = x.n;
  std::vector<KeyTiles> out(static_cast<std::size_t>(n.b * n.hkv));
  parallel_for(n.b * n.hkv, threads, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t bh = lo; bh < hi; ++bh) {
      const std::int64_t b = bh / n.hkv;
      std::vector<std::int64_t> index;
      for (std::int64_t j = 0; j < n.skv; ++j)
        if (x.valid[static_cast<std::size_t>(b * n.skv + j)] != 0) index.push_back(j);
      const std::size_t base = static_cast<std::size_t>(bh * n.skv * n.d);
      out[static_cast<std::size_t>(bh)] = make_tiles(std::move(index), x.k.data() + base, x.v.data() + base, n.d, with_v);
    }
  });
  return out;
}

// ---- candidate --------------------------------------------------------------------------------

// visible[b][i]: how many of b's valid keys query i sees (always a prefix of the valid keys).
std::vector<std::int64_t> visible_counts(const Inputs& x, const std::vector<KeyTiles>& tiles) {
  const Dims& n = x.n;
  std::vector<std::int64_t> out(static_cast<std::size_t>(n.b * n.sq));
  for (std::int64_t b = 0; b < n.b; ++b) {
    const auto& index = tiles[static_cast<std::size_t>(b * n.hkv)].index;
    for (std::int64_t i = 0; i < n.sq; ++i)
      out[static_cast<std::size_t>(b * n.sq + i)] =
          std::upper_bound(index.begin(), index.end(), i + n.offset()) - index.begin();
  }
  return out;
}

// The online-softmax forward of one query row over the first `count` keys of `keys`. Writes
// the FP32 o (0 when count == 0) and returns the LSE (+inf when count == 0). pv: d floats.
float online_row(const float* q, const KeyTiles& keys, const float* v, std::int64_t count,
                 std::int64_t d, float scale, float* o, float* pv) {
  float m = -kInf, l = 0.0f;
  std::fill(o, o + d, 0.0f);  // the accumulator
  float s[kTile];
  for (std::int64_t t = 0; t * kTile < count; ++t) {
    const std::int64_t lanes = std::min(kTile, count - t * kTile);
    dot_lanes(q, keys.kT.data() + t * d * kTile, d, s);
    float tile_max = -kInf;
    for (std::int64_t j = 0; j < lanes; ++j) {
      s[j] *= scale;
      tile_max = std::max(tile_max, s[j]);
    }
    const float m_new = std::max(m, tile_max);
    const float alpha = std::exp(m - m_new);
    float tile_sum = 0.0f;
    for (std::int64_t j = 0; j < lanes; ++j) {
      s[j] = std::exp(s[j] - m_new);
      tile_sum += s[j];
    }
    std::fill(pv, pv + d, 0.0f);
    combine_rows(s, lanes, v, keys.index.data() + t * kTile, d, pv);
    l = std::fma(l, alpha, tile_sum);
    rescale_add(o, alpha, pv, d);
    m = m_new;
  }
  if (count == 0) return kInf;
  for (std::int64_t e = 0; e < d; ++e) o[e] /= l;
  return m + std::log(l);
}

struct CandidateState {
  std::vector<KeyTiles> tiles;        // valid keys per (b, kv head)
  std::vector<std::int64_t> visible;  // [B, Sq]
  std::vector<float> o, lse, dsum;    // FP32 o [B, Hq, Sq, D]; LSE and Dsum [B, Hq, Sq]
};

// Forward rows of one task (b, h, query block); for backward also Dsum = dO . o.
void candidate_forward_rows(const Inputs& x, CandidateState& st, std::int64_t task, bool with_dsum) {
  const Dims& n = x.n;
  const std::int64_t blocks = (n.sq + kQueryBlock - 1) / kQueryBlock;
  const std::int64_t bh = task / blocks, b = bh / n.hq, h = bh % n.hq;
  const std::int64_t kvh = b * n.hkv + h / n.group();
  const KeyTiles& keys = st.tiles[static_cast<std::size_t>(kvh)];
  const float* v = x.v.data() + kvh * n.skv * n.d;
  std::vector<float> pv(static_cast<std::size_t>(n.d));
  const std::int64_t i_end = std::min(n.sq, (task % blocks + 1) * kQueryBlock);
  for (std::int64_t i = (task % blocks) * kQueryBlock; i < i_end; ++i) {
    const std::int64_t row = bh * n.sq + i;
    const auto r = static_cast<std::size_t>(row);
    float* o = st.o.data() + row * n.d;
    st.lse[r] = online_row(x.q.data() + row * n.d, keys, v,
                           st.visible[static_cast<std::size_t>(b * n.sq + i)], n.d, x.scale, o, pv.data());
    if (with_dsum) st.dsum[r] = dot(x.dy.data() + row * n.d, o, n.d);
  }
}

CandidateState candidate_forward_all(const Inputs& x, bool backward, unsigned threads) {
  const Dims& n = x.n;
  CandidateState st;
  st.tiles = key_tiles(x, /*with_v=*/backward, threads);
  st.visible = visible_counts(x, st.tiles);
  st.o.assign(static_cast<std::size_t>(n.b * n.hq * n.sq * n.d), 0.0f);
  st.lse.assign(static_cast<std::size_t>(n.b * n.hq * n.sq), 0.0f);
  if (backward) st.dsum.assign(st.lse.size(), 0.0f);
  const std::int64_t blocks = (n.sq + kQueryBlock - 1) / kQueryBlock;
  parallel_for(n.b * n.hq * blocks, threads, [&](std::int64_t lo, std::int64_t hi) {
    for (std::int64_t task = lo; task < hi; ++task) candidate_forward_rows(x, st, task, backward);
  });
  return st;
}

// P (into p) and dS (into ds) of one query row against the first `lanes` keys of tile t.
void row_tile_grads(const Inputs& x, const CandidateState& st, const KeyTiles& keys, std::int64_t t,
                    std::int64_t row, std::int64_t lanes, float* p, float* ds) {
  const std::int64_t d = x.n.d;
  const auto r = static_cast<std::size_t>(row);
  dot_lanes(x.q.data() + row * d, keys.kT.data() + t * d * kTile, d, p);
  dot_lanes(x.dy.data() + row * d, keys.vT.data() + t * d * kTile, d, ds);
  for (std::int64_t j = 0; j < lanes; ++j) {
    p[j] = std::exp(p[j] * x.scale - st.lse[r]);
    ds[j] = p[j] * (ds[j] - st.dsum[r]);
  }
}

// dq rows of one task (b, h, query block): fma over the visible keys in key order, then * scale.
void candidate_dq_rows(const Inputs& x, const CandidateState& st, std::int64_t task, float* dq) {
  const Dims& n = x.n;
  const std::int64_t blocks = (n.sq + kQueryBlock - 1) / kQueryBlock;
  const std::int64_t bh = task / blocks, b = bh / n.hq, h = bh % n.hq;
  const std::int64_t kvh = b * n.hkv + h / n.group();
  const KeyTiles& keys = st.tiles[static_cast<std::size_t>(kvh)];
  const float* k = x.k.data() + kvh * n.skv * n.d;
  float p[kTile], ds[kTile];
  const std::int64_t i_end = std::min(n.sq, (task % blocks + 1) * kQueryBlock);
  for (std::int64_t i = (task % blocks) * kQueryBlock; i < i_end; ++i) {
    const std::int64_t row = bh * n.sq + i;
    const std::int64_t count = st.visible[static_cast<std::size_t>(b * n.sq + i)];
    float* out = dq + row * n.d;
    std::fill(out, out + n.d, 0.0f);
    for (std::int64_t t = 0; t * kTile < count; ++t) {
      const std::int64_t lanes = std::min(kTile, count - t * kTile);
      row_tile_grads(x, st, keys, t, row, lanes, p, ds);
      combine_rows(ds, lanes, k, keys.index.data() + t * kTile, n.d, out);
    }
    for (std::int64_t e = 0; e < n.d; ++e) out[e] *= x.scale;
  }
}

// dk, dv of one task (b, kv head, key tile): per query head of the group a partial over the
// queries in index order, the partials summed in head order; dk then * scale.
void candidate_dkdv_tile(const Inputs& x, const CandidateState& st, std::int64_t task, float* dk,
                         float* dv) {
  const Dims& n = x.n;
  const std::int64_t kv_tiles = (n.skv + kTile - 1) / kTile;  // a bound: valid keys may be fewer
  const std::int64_t kvh = task / kv_tiles, t = task % kv_tiles, b = kvh / n.hkv, kv = kvh % n.hkv;
  const KeyTiles& keys = st.tiles[static_cast<std::size_t>(kvh)];
  if (t >= keys.tiles()) return;
  const std::int64_t lanes =
      std::min<std::int64_t>(kTile, static_cast<std::int64_t>(keys.index.size()) - t * kTile);
  const auto width = static_cast<std::size_t>(lanes * n.d);
  std::vector<float> dk_sum(width, 0.0f), dv_sum(width, 0.0f), dk_part(width), dv_part(width);
  float p[kTile], ds[kTile];
  for (std::int64_t g = 0; g < n.group(); ++g) {
    const std::int64_t bh = b * n.hq + kv * n.group() + g;
    std::fill(dk_part.begin(), dk_part.end(), 0.0f);
    std::fill(dv_part.begin(), dv_part.end(), 0.0f);
    for (std::int64_t i = 0; i < n.sq; ++i) {
      const std::int64_t seen = st.visible[static_cast<std::size_t>(b * n.sq + i)] - t * kTile;
      if (seen <= 0) continue;
      const std::int64_t row = bh * n.sq + i, here = std::min(lanes, seen);
      row_tile_grads(x, st, keys, t, row, here, p, ds);
      scatter_rows(p, here, x.dy.data() + row * n.d, n.d, dv_part.data());
      scatter_rows(ds, here, x.q.data() + row * n.d, n.d, dk_part.data());
    }
    for (std::size_t e = 0; e < width; ++e) {
      dk_sum[e] += dk_part[e];
      dv_sum[e] += dv_part[e];
    }
  }
  for (std::int64_t j = 0; j < lanes; ++j) {
    const std::int64_t at = (kvh * n.skv + keys.index[static_cast<std::size_t>(t * kTile + j)]) * n.d;
    for (std::int64_t e = 0; e < n.d; ++e) {
      dk[at + e] = dk_sum[static_cast<std::size_t>(j * n.d + e)] * x.scale;
      dv[at + e] = dv_sum[static_cast<std::size_t>(j * n.d + e)];
    }
  }
}

// ---- entry points -----------------------------------------------------------------------------

Result<Tensors> forward(const Tensors& in, const OpContext& ctx) {
  return guarded(kOp, [&] {
    const Inputs x = read_inputs(in, /*backward=*/false);
    const CandidateState st = candidate_forward_all(x, /*backward=*/false, ctx.threads);
    return Tensors{{"o", bf16_tensor(x.q_shape, st.o)}};
  });
}

Result<Tensors> backward(const Tensors& in, const OpContext& ctx) {
  return guarded(kOp, [&] {
    const Inputs x = read_inputs(in, /*backward=*/true);
    const Dims& n = x.n;
    std::vector<float> dq(x.q.size(), 0.0f), dk(x.k.size(), 0.0f), dv(x.v.size(), 0.0f);
    const CandidateState st = candidate_forward_all(x, /*backward=*/true, ctx.threads);
    const std::int64_t blocks = (n.sq + kQueryBlock - 1) / kQueryBlock;
    parallel_for(n.b * n.hq * blocks, ctx.threads, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t task = lo; task < hi; ++task) candidate_dq_rows(x, st, task, dq.data());
    });
    const std::int64_t kv_tiles = (n.skv + kTile - 1) / kTile;
    parallel_for(n.b * n.hkv * kv_tiles, ctx.threads, [&](std::int64_t lo, std::int64_t hi) {
      for (std::int64_t task = lo; task < hi; ++task) candidate_dkdv_tile(x, st, task, dk.data(), dv.data());
    });
    return Tensors{{"dq", bf16_tensor(x.q_shape, dq)},
                   {"dk", bf16_tensor(x.kv_shape, dk)},
                   {"dv", bf16_tensor(x.kv_shape, dv)}};
  });
}

class Attention final : public Op {
 public:
  Attention() : Op(*find_op("attention")) {}
  std::vector<TensorDecl> outputs() const override { return {{"o", DType::kBF16}}; }
  std::vector<TensorDecl> gradients() const override {
    return {{"dq", DType::kBF16}, {"dk", DType::kBF16}, {"dv", DType::kBF16}};
  }
  TokenLayout token_layout() const override { return TokenLayout::kAttentionGrid; }
  // Score and value products over the visible (query, key) pairs: 4·D FLOPs per pair and
  // query head forward; backward 10·D (recomputed scores, dv, dp, dq, dk: FlashAttention's
  // 2.5x convention).
  OpWork work(const Tensors& in, bool backward) const override {
    try {
      const AttentionInputs x = check_attention_inputs(in, backward);
      const AttentionDims& n = x.n;
      double pairs = 0.0;
      std::vector<std::int64_t> seen(static_cast<std::size_t>(n.skv) + 1);  // valid keys before j
      for (std::int64_t b = 0; b < n.b; ++b) {
        for (std::int64_t j = 0; j < n.skv; ++j)
          seen[static_cast<std::size_t>(j + 1)] = seen[static_cast<std::size_t>(j)] + x.valid[static_cast<std::size_t>(b * n.skv + j)];
        for (std::int64_t i = 0; i < n.sq; ++i) {
          const std::int64_t last = std::min(n.skv, i + (n.skv - n.sq) + 1);  // keys [0, last)
          if (last > 0) pairs += static_cast<double>(seen[static_cast<std::size_t>(last)]);
        }
      }
      return {{}, (backward ? 10.0 : 4.0) * static_cast<double>(n.d) * static_cast<double>(n.hq) * pairs};
    } catch (const OpInputError&) {
      return {};
    }
  }
  Result<Tensors> cpu_forward(const Tensors& in, const OpContext& ctx) const override {
    return forward(in, ctx);
  }
  Result<Tensors> cpu_backward(const Tensors& in, const OpContext& ctx) const override {
    return backward(in, ctx);
  }
};

}  // namespace

const Op& attention_op() {
  static const Attention op;
  return op;
}

}  // namespace ws1::ops
