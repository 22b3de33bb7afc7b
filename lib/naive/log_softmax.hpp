// Internal to lib/naive: the eager-bf16 pieces that logp, batch_invariant_logp, linear_logp (and,
// for F.linear, lm_head) share.
//
// Selected log-softmax of bf16 logits x [T, V] with targets y [T]:
//   out  = F.log_softmax(x, -1)   bf16: per row m = max(x), S = sum_fp32(exp(x - m)),
//                                 out[i] = bf((x[i] - m) - log(S)) (FP32 inside, one rounding)
//   logp = out.gather(-1, y)      exact (a bf16 value); .float() widens it exactly
// Rows whose target is ignore_index (batch_invariant_logp) are left out of the graph, as eager
// `logp = zeros(T); logp[mask] = log_softmax(x[mask]).gather(...)` does: their logp is +0 and
// their gradient rows are +0 (index_put / indexing backward), whatever their logits hold.
// Backward, through the same nodes (dy.logp float32):
//   g_sel = bf(dy)                       grad of the .float() cast
//   g     = zeros_like(x).scatter(y, g_sel)  gather's backward, exact (bf16)
//   dx[i] = bf(g[i] - exp(out[i]) * sum_fp32(g))   log_softmax's backward node, FP32 from the
//                                                   bf16 out and g, one rounding
// F.linear(hidden [T, H], weight [V, H]) without bias (a plain mm: FP32 accumulation, one
// rounding per output): z = bf(hidden @ weight^T); backward dhidden = bf(G @ weight),
// dweight = bf(G^T @ hidden).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "../ref/logp_inputs.hpp"
#include "support.hpp"

namespace ws1::naive {

// ---- F.log_softmax over one row and its autograd node ----

// out[0..n) = bf16 log_softmax of x[0..n); out doubles as the exp scratch.
inline void log_softmax_row(const float* x, float* out, std::int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (std::int64_t i = 0; i < n; ++i)
    if (x[i] > m) m = x[i];  // a NaN is passed over; it reaches out through S
  for (std::int64_t i = 0; i < n; ++i) out[i] = std::exp(x[i] - m);
  const float log_sum = std::log(sum_fp32(out, n));
  for (std::int64_t i = 0; i < n; ++i) out[i] = bf((x[i] - m) - log_sum);
}

// g[0..n) (the bf16 upstream gradient of out) becomes dx = bf(g - exp(out) * sum(g)) in place.
inline void log_softmax_backward_row(const float* out, float* g, std::int64_t n) {
  const float s = sum_fp32(g, n);
  for (std::int64_t i = 0; i < n; ++i) {
    const float p = std::exp(out[i]) * s;
    g[i] = bf(g[i] - p);
  }
}

// ---- the selected rows ----

// The selection the log-softmax graph works on: [rows, vocab] logits picked by targets (lead,
// rows, vocab, targets, skip; the reading and its checks are lib/ref's logp_inputs.hpp).
using Selection = ref::TargetRows;

// logp [rows] (bf16 values, +0 on ignored rows) of bf16 logits z [rows, vocab].
inline std::vector<float> selected_logp(const std::vector<float>& z, const Selection& s, unsigned threads) {
  std::vector<float> logp(static_cast<std::size_t>(s.rows), 0.0f);
  ref::each_index(s.rows, threads, [&](std::int64_t r) {
    const auto ri = static_cast<std::size_t>(r);
    if (!s.skip.empty() && s.skip[ri]) return;
    std::vector<float> out(static_cast<std::size_t>(s.vocab));
    log_softmax_row(z.data() + r * s.vocab, out.data(), s.vocab);
    logp[ri] = out[static_cast<std::size_t>(s.targets[ri])];
  });
  return logp;
}

// dlogits [rows, vocab] (bf16 values) of bf16 logits z [rows, vocab] for the float32 upstream
// gradient dy [rows] of the widened logp; the log-softmax output is recomputed (same bits as the
// forward's saved tensor).
inline std::vector<float> selected_logp_gradient(const std::vector<float>& z, const Selection& s,
                                                 const std::vector<float>& dy, unsigned threads) {
  std::vector<float> dz(static_cast<std::size_t>(s.rows * s.vocab), 0.0f);
  ref::each_index(s.rows, threads, [&](std::int64_t r) {
    const auto ri = static_cast<std::size_t>(r);
    if (!s.skip.empty() && s.skip[ri]) return;  // outside the graph: stays +0
    std::vector<float> out(static_cast<std::size_t>(s.vocab));
    log_softmax_row(z.data() + r * s.vocab, out.data(), s.vocab);
    float* g = dz.data() + r * s.vocab;
    g[s.targets[ri]] = bf(dy[ri]);
    log_softmax_backward_row(out.data(), g, s.vocab);
  });
  return dz;
}

// ---- logp / batch_invariant_logp: logits [..., V] bf16 given ----

// "logp" [...] float32 (the bf16 values widened) of logp and batch_invariant_logp.
inline Tensors logit_logp_forward(const Call& call, bool honour_ignore_index) {
  const ref::LogitRows x = ref::read_logit_rows(call, honour_ignore_index, false);
  return {{"logp", widened_tensor(x.lead, selected_logp(x.logits, x, call.ctx().threads))}};
}

// "dlogits" [..., V] bf16 of logp and batch_invariant_logp.
inline Tensors logit_logp_backward(const Call& call, bool honour_ignore_index) {
  const ref::LogitRows x = ref::read_logit_rows(call, honour_ignore_index, true);
  Shape shape = x.lead;
  shape.push_back(x.vocab);
  return {{"dlogits", bf16_tensor(shape, selected_logp_gradient(x.logits, x, x.dy, call.ctx().threads))}};
}

// ---- F.linear(hidden, weight), no bias ----

// z [rows, vocab] = bf(hidden [rows, width] @ weight [vocab, width]^T).
inline std::vector<float> linear_bf16(const std::vector<float>& hidden, const std::vector<float>& weight,
                                      std::int64_t rows, std::int64_t width, std::int64_t vocab, unsigned threads) {
  std::vector<float> z(static_cast<std::size_t>(rows * vocab));
  matmul_bf16(hidden.data(), weight.data(), z.data(), rows, width, vocab, true, threads);
  return z;
}

struct LinearGradients {
  std::vector<float> dhidden, dweight;  // [rows, width], [vocab, width], bf16 values
};

// F.linear's backward for the bf16 upstream gradient g [rows, vocab] (consumed).
inline LinearGradients linear_bf16_backward(std::vector<float> g, const std::vector<float>& hidden,
                                            const std::vector<float>& weight, std::int64_t rows,
                                            std::int64_t width, std::int64_t vocab, unsigned threads) {
  LinearGradients d;
  // dhidden [rows, width] = bf(g [rows, vocab] @ weight [vocab, width]).
  d.dhidden.resize(static_cast<std::size_t>(rows * width));
  matmul_bf16(g.data(), weight.data(), d.dhidden.data(), rows, vocab, width, false, threads);
  // dweight [vocab, width] = bf(g^T [vocab, rows] @ hidden [rows, width]); g is dropped once
  // transposed (one [rows, vocab] buffer at a time).
  const std::vector<float> gt = ref::transposed(g, rows, vocab);
  std::vector<float>().swap(g);
  d.dweight.resize(static_cast<std::size_t>(vocab * width));
  matmul_bf16(gt.data(), hidden.data(), d.dweight.data(), vocab, rows, width, false, threads);
  return d;
}

}  // namespace ws1::naive
