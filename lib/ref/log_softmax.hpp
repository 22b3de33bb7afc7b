// Internal to lib/ref: the selected log-softmax of FP32 rows, shared by the logp,
// batch_invariant_logp and linear_logp references (their inputs are read by logp_inputs.hpp).
//
// For a row z[0..V) with target y:
//   m = max_i z[i],  S = sum_i exp(z[i] - m)  (FP32, summed as a cascade: see cascade_sum)
//   logp = (z[y] - m) - log(S)                     (= z[y] - logsumexp(z))
//   d logp / d z[i] = onehot(y)[i] - exp(z[i] - m) / S   (onehot - softmax)
// The max is subtracted before the final difference, not added back into the lse first, so a
// logp near 0 does not carry an error of the size of ulp(m).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "logp_inputs.hpp"
#include "support.hpp"

namespace ws1::ref {

// Sum of x[0..n) in FP32: runs of 32 summed left to right, the run sums combined as a binary
// tree (a carry stack: level l holds the sum of 2^l runs), so the rounding error grows with
// log(n) rather than n — a plain left-to-right sum over 151936 terms would not be a gold.
inline float cascade_sum(const float* x, std::int64_t n) {
  constexpr std::int64_t kRun = 32;
  float level[64];
  bool full[64] = {};
  for (std::int64_t start = 0; start < n; start += kRun) {
    const std::int64_t end = start + kRun < n ? start + kRun : n;
    float carry = 0.0f;
    for (std::int64_t i = start; i < end; ++i) carry += x[i];
    int l = 0;
    for (; full[l]; ++l) {
      carry = level[l] + carry;
      full[l] = false;
    }
    level[l] = carry;
    full[l] = true;
  }
  // The leftover levels, smallest first (they are the trailing, smaller groups).
  float total = 0.0f;
  bool any = false;
  for (int l = 0; l < 64; ++l)
    if (full[l]) {
      total = any ? level[l] + total : level[l];
      any = true;
    }
  return total;
}

// Largest element of x[0..n) (-inf when there is none). A NaN is passed over here; it still
// reaches the results through the sum of exponentials.
inline float row_max(const float* x, std::int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (std::int64_t i = 0; i < n; ++i)
    if (x[i] > m) m = x[i];
  return m;
}

// Overwrites z[0..n) with exp(z[i] - m), m the row max, and returns (m, S = their sum).
struct ShiftedExp {
  float max, sum;
};
inline ShiftedExp shifted_exp_in_place(float* z, std::int64_t n) {
  const float m = row_max(z, n);
  for (std::int64_t i = 0; i < n; ++i) z[i] = std::exp(z[i] - m);
  return {m, cascade_sum(z, n)};
}

// logp of every row of z [rows, vocab] (overwritten: it is scratch). Rows with skip[r] give +0.
inline std::vector<float> selected_logp_rows(std::vector<float>& z, std::int64_t rows, std::int64_t vocab,
                                             const std::vector<std::int64_t>& targets,
                                             const std::vector<bool>& skip, unsigned threads) {
  std::vector<float> out(static_cast<std::size_t>(rows), 0.0f);
  each_index(rows, threads, [&](std::int64_t r) {
    const auto ri = static_cast<std::size_t>(r);
    if (!skip.empty() && skip[ri]) return;
    float* row = z.data() + r * vocab;
    const float target = row[targets[ri]];
    const ShiftedExp e = shifted_exp_in_place(row, vocab);
    out[ri] = (target - e.max) - std::log(e.sum);
  });
  return out;
}

// Turns z [rows, vocab] in place into G = dy * (onehot(y) - softmax(z)), row by row; rows with
// skip[r] become all +0 (their dy is not read).
inline void selected_logp_gradient_rows(std::vector<float>& z, std::int64_t rows, std::int64_t vocab,
                                        const std::vector<std::int64_t>& targets, const std::vector<bool>& skip,
                                        const std::vector<float>& dy, unsigned threads) {
  each_index(rows, threads, [&](std::int64_t r) {
    const auto ri = static_cast<std::size_t>(r);
    float* row = z.data() + r * vocab;
    if (!skip.empty() && skip[ri]) {
      for (std::int64_t i = 0; i < vocab; ++i) row[i] = 0.0f;
      return;
    }
    const ShiftedExp e = shifted_exp_in_place(row, vocab);
    const float d = dy[ri];
    const std::int64_t y = targets[ri];
    for (std::int64_t i = 0; i < vocab; ++i) {
      const float softmax = row[i] / e.sum;
      row[i] = d * ((i == y ? 1.0f : 0.0f) - softmax);
    }
  });
}

// The selected-logp forward ("logp" [...]) and backward ("dlogits" [..., V]) of logp and, with
// `honour_ignore_index`, batch_invariant_logp.
inline Tensors selected_logp_forward(const Call& call, bool honour_ignore_index) {
  LogitRows x = read_logit_rows(call, honour_ignore_index, false);
  std::vector<float> logp = selected_logp_rows(x.logits, x.rows, x.vocab, x.targets, x.skip, call.ctx().threads);
  return {{"logp", f32_tensor(x.lead, std::move(logp))}};
}

inline Tensors selected_logp_backward(const Call& call, bool honour_ignore_index) {
  LogitRows x = read_logit_rows(call, honour_ignore_index, true);
  Shape shape = x.lead;
  shape.push_back(x.vocab);
  // The widened logits become the gradient in place: no second [T, V] buffer.
  selected_logp_gradient_rows(x.logits, x.rows, x.vocab, x.targets, x.skip, x.dy, call.ctx().threads);
  return {{"dlogits", f32_tensor(shape, std::move(x.logits))}};
}

}  // namespace ws1::ref
