// attention, the eager-bf16 way (FlashAttention's attention_ref(..., upcast=False,
// reorder_ops=True)): the function of lib/ref/attention.cpp (GQA; its inputs, checks, scale =
// float(1/sqrt(D)) and visibility rule shared through lib/ref/attention_inputs.hpp), each
// PyTorch op's result a bf16 tensor.
//
// Inputs q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D] (bf16), optional key_mask [B, Skv] (bool);
// backward adds dy.o [B, Hq, Sq, D] (bf16). Query head h reads kv head h / (Hq / Hkv)
// (k, v repeat_interleave'd over the group). Key j is visible to query i iff
// j <= i + (Skv - Sq) (causal, bottom-right) and key_mask[b, j]. lib/ref has no lse output, no
// cu_seqlens/varlen input and no lse gradient, so neither has this.
//
// Forward, per (b, h), every line one eager op, its result rounded to bf16 (bf):
//   qs = bf(q * scale)                      q scaled first (reorder_ops), one op
//   s  = qs @ k^T                           matmul_bf16: FP32 accumulation, bf16 scores [Sq, Skv]
//   s[i, j] = -inf where j is not visible   masked_fill (exact)
//   p  = softmax(s, -1)                     FP32 from the bf16 scores: m = max_j s, e = exp(s - m),
//                                           sum = sum_fp32(e), p = bf(e / sum)
//   o  = p @ v                              matmul_bf16
// A query row with no visible key: m = -inf, so exp(-inf - -inf) makes its p row NaN, as in
// PyTorch and lib/ref: its o row is NaN (and in the backward its dq row and the dk, dv of every
// key of its kv head, which is every kv head of the batch: the mask does not depend on the head).
//
// Backward (autograd through the same graph, every node's result bf16), dO = dy.o:
//   dv_h = p^T @ dO                         matmul_bf16 (per query head: the expanded v's grad)
//   dp   = dO @ v^T                         matmul_bf16
//   ds   = p * (dp - sum_j(dp * p))         _softmax_backward_data: FP32 from the bf16 p and dp
//                                           (sum_fp32 of the exact products), one bf per element
//   dqs  = ds @ k                           matmul_bf16
//   dq   = bf(dqs * scale)                  the backward of q * scale
//   dk_h = ds^T @ qs                        matmul_bf16
//   dk, dv = sum over the group's heads of dk_h, dv_h: repeat_interleave's backward, an FP32
//            sum in increasing h, one bf.
//
// Outputs: o; dq, dk, dv, bf16 (the op's declared candidate dtypes; lib/ref gives them FP32).
// Memory: each (b, h) task holds two [Sq, Skv] FP32 blocks (the scores/probabilities and their
// transpose or dp/ds), never the whole [B, H, Sq, Skv]; tasks run on ctx.threads workers, each
// of its matmuls on its own thread.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "../ref/attention_inputs.hpp"
#include "support.hpp"

namespace ws1::naive {
namespace {

using ref::AttentionDims;
using ref::AttentionInputs;
using ref::each_index;
using ref::read_attention_inputs;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// (b, h)'s kv head's first element in k, v.
std::int64_t kv_row(const AttentionDims& n, std::int64_t bh) {
  return ((bh / n.hq) * n.hkv + (bh % n.hq) / n.group()) * n.skv * n.d;
}

// dst[c, r] = src[r, c] for a row-major [rows, cols] src (dst sized rows * cols).
void transpose_into(const std::vector<float>& src, std::int64_t rows, std::int64_t cols, std::vector<float>& dst) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      dst[static_cast<std::size_t>(c * rows + r)] = src[static_cast<std::size_t>(r * cols + c)];
}

// (b, h)'s qs = bf(q * scale) [Sq, D] and p = softmax(masked qs @ k^T) [Sq, Skv], both bf16.
void probabilities(const AttentionInputs& x, std::int64_t bh, std::vector<float>& qs, std::vector<float>& p) {
  const AttentionDims& n = x.n;
  const std::int64_t batch = bh / n.hq;
  const float* q = x.q.data() + bh * n.sq * n.d;
  qs.resize(static_cast<std::size_t>(n.sq * n.d));
  for (std::size_t e = 0; e < qs.size(); ++e) qs[e] = bf(q[e] * x.scale);
  p.resize(static_cast<std::size_t>(n.sq * n.skv));
  matmul_bf16(qs.data(), x.k.data() + kv_row(n, bh), p.data(), n.sq, n.d, n.skv, /*b_rows_are_n=*/true, 1);
  std::vector<float> e(static_cast<std::size_t>(n.skv));
  for (std::int64_t i = 0; i < n.sq; ++i) {
    float* s = p.data() + i * n.skv;
    float m = kNegInf;
    for (std::int64_t j = 0; j < n.skv; ++j) {
      if (!x.visible(batch, i, j)) s[j] = kNegInf;  // masked_fill
      m = std::max(m, s[j]);
    }
    for (std::int64_t j = 0; j < n.skv; ++j) e[static_cast<std::size_t>(j)] = std::exp(s[j] - m);  // NaN if m = -inf
    const float sum = sum_fp32(e.data(), n.skv);
    for (std::int64_t j = 0; j < n.skv; ++j) s[j] = bf(e[static_cast<std::size_t>(j)] / sum);
  }
}

}  // namespace

Tensors attention_forward(const Call& call) {
  const AttentionInputs x = read_attention_inputs(call, /*backward=*/false);
  const AttentionDims& n = x.n;
  std::vector<float> o(x.q.size());
  each_index(n.b * n.hq, call.ctx().threads, [&](std::int64_t bh) {
    std::vector<float> qs, p;
    probabilities(x, bh, qs, p);
    matmul_bf16(p.data(), x.v.data() + kv_row(n, bh), o.data() + bh * n.sq * n.d, n.sq, n.skv, n.d, false, 1);
  });
  return {{"o", bf16_tensor(x.q_shape, o)}};
}

Tensors attention_backward(const Call& call) {
  const AttentionInputs x = read_attention_inputs(call, /*backward=*/true);
  const AttentionDims& n = x.n;
  const std::int64_t sq = n.sq, skv = n.skv, d = n.d;
  std::vector<float> dq(x.q.size());
  // Per query head: the expanded k's and v's gradients (bf16 values), [B, Hq, Skv, D].
  std::vector<float> dk_h(static_cast<std::size_t>(n.b * n.hq * skv * d));
  std::vector<float> dv_h(dk_h.size());
  each_index(n.b * n.hq, call.ctx().threads, [&](std::int64_t bh) {
    std::vector<float> qs, p;
    probabilities(x, bh, qs, p);
    const float* dout = x.dy.data() + bh * sq * d;
    const float* k = x.k.data() + kv_row(n, bh);
    const float* v = x.v.data() + kv_row(n, bh);
    float* dk_out = dk_h.data() + bh * skv * d;
    float* dv_out = dv_h.data() + bh * skv * d;
    std::vector<float> t(p.size());  // p^T, then dp and ds
    transpose_into(p, sq, skv, t);
    matmul_bf16(t.data(), dout, dv_out, skv, sq, d, false, 1);  // dv_h = p^T @ dO
    matmul_bf16(dout, v, t.data(), sq, d, skv, true, 1);        // dp = dO @ v^T
    std::vector<float> prod(static_cast<std::size_t>(skv));
    for (std::int64_t i = 0; i < sq; ++i) {  // ds = p * (dp - sum(dp * p)), in place of dp
      const float* pi = p.data() + i * skv;
      float* di = t.data() + i * skv;
      for (std::int64_t j = 0; j < skv; ++j) prod[static_cast<std::size_t>(j)] = di[j] * pi[j];
      const float dsum = sum_fp32(prod.data(), skv);
      for (std::int64_t j = 0; j < skv; ++j) di[j] = bf(pi[j] * (di[j] - dsum));
    }
    float* dq_out = dq.data() + bh * sq * d;
    matmul_bf16(t.data(), k, dq_out, sq, skv, d, false, 1);  // dqs = ds @ k
    for (std::int64_t e = 0; e < sq * d; ++e) dq_out[e] = bf(dq_out[e] * x.scale);
    transpose_into(t, sq, skv, p);                           // p's block now holds ds^T
    matmul_bf16(p.data(), qs.data(), dk_out, skv, sq, d, false, 1);  // dk_h = ds^T @ qs
  });
  // repeat_interleave's backward: the group's heads summed in FP32 (increasing h), one rounding.
  std::vector<float> dk(x.k.size()), dv(x.v.size());
  const std::int64_t block = skv * d;
  each_index(n.b * n.hkv, call.ctx().threads, [&](std::int64_t bkv) {
    const std::int64_t first_head = (bkv / n.hkv) * n.hq + (bkv % n.hkv) * n.group();
    for (std::int64_t e = 0; e < block; ++e) {
      float sk = dk_h[static_cast<std::size_t>(first_head * block + e)];  // from the first head: a group
      float sv = dv_h[static_cast<std::size_t>(first_head * block + e)];  // of one is the identity (-0 stays)
      for (std::int64_t g = 1; g < n.group(); ++g) {
        sk = sk + dk_h[static_cast<std::size_t>((first_head + g) * block + e)];
        sv = sv + dv_h[static_cast<std::size_t>((first_head + g) * block + e)];
      }
      dk[static_cast<std::size_t>(bkv * block + e)] = bf(sk);
      dv[static_cast<std::size_t>(bkv * block + e)] = bf(sv);
    }
  });
  return {{"dq", bf16_tensor(x.q_shape, dq)}, {"dk", bf16_tensor(x.kv_shape, dk)}, {"dv", bf16_tensor(x.kv_shape, dv)}};
}

}  // namespace ws1::naive
