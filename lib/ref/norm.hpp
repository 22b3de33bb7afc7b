// Internal to lib/ref: RMSNorm over the last dimension in FP32, the definition behind rms_norm
// (hidden width) and qk_norm (head_dim, every head of every token its own row).
//
// Per row x of width W, weight w, eps = float32(ctx.rms_norm_eps):
//   r    = 1 / sqrt(sum(x[i]*x[i]) / W + eps)
//   y[i] = (x[i] * r) * w[i]
// Backward, from the same definition, g = dy * w:
//   dx[i]      = r * g[i] - x[i] * (r*r*r * (sum(g[j]*x[j]) / W))
//   dweight[i] = sum over all rows of dy[i] * (x[i] * r)
// Every sum is pairwise (sum() below): its FP32 rounding error grows with log n, as in torch's
// CPU reductions, rather than with n as one chain's would, so at 4096 columns or 262144 rows
// (qk_norm: 8192 tokens x 32 heads) the reference stays far more accurate than the bf16
// candidate it judges. ctx.rms_norm_order is the bf16 candidate's rounding order; the FP32
// definition has none.
// The inputs (Rows, read) and their checks: norm_inputs.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "norm_inputs.hpp"
#include "support.hpp"

namespace ws1::ref::norm {

// Rows per each_index task: a task of a few thousand elements keeps the hand-out cheap.
inline std::int64_t rows_per_task(std::int64_t width) {
  return width >= 4096 ? 1 : 4096 / (width > 0 ? width : 1);
}

// Sum of v[0..n): ranges of at most kLeaf terms are added left to right from +0; a longer one
// is the sum of its halves [0, n/2) and [n/2, n).
inline constexpr std::int64_t kLeaf = 16;
inline float sum(const float* v, std::int64_t n) {
  if (n <= kLeaf) {
    float s = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) s = s + v[i];
    return s;
  }
  const std::int64_t half = n / 2;
  return sum(v, half) + sum(v + half, n - half);
}

// r = 1 / sqrt(mean(x^2) + eps) of one row; `sq` is scratch of `width` floats.
inline float inverse_rms(const float* x, std::int64_t width, float eps, float* sq) {
  for (std::int64_t i = 0; i < width; ++i) sq[i] = x[i] * x[i];
  return 1.0f / std::sqrt(sum(sq, width) / static_cast<float>(width) + eps);
}

// dweight columns [c0, c0 + cols) summed over rows [r0, r1) into out[0, cols): the same
// pairwise split as sum(), over rows, each column on its own.
inline constexpr std::int64_t kColumns = 32;
inline void column_sums(const Rows& n, const std::vector<float>& inv, std::int64_t r0, std::int64_t r1,
                        std::int64_t c0, std::int64_t cols, float* out) {
  if (r1 - r0 <= kLeaf) {
    std::fill(out, out + cols, 0.0f);
    for (std::int64_t row = r0; row < r1; ++row) {
      const float* x = n.x.data() + row * n.width + c0;
      const float* dy = n.dy.data() + row * n.width + c0;
      const float r = inv[static_cast<std::size_t>(row)];
      for (std::int64_t i = 0; i < cols; ++i) out[i] = out[i] + dy[i] * (x[i] * r);
    }
    return;
  }
  float right[kColumns];
  const std::int64_t mid = r0 + (r1 - r0) / 2;
  column_sums(n, inv, r0, mid, c0, cols, out);
  column_sums(n, inv, mid, r1, c0, cols, right);
  for (std::int64_t i = 0; i < cols; ++i) out[i] = out[i] + right[i];
}

inline Tensors forward(const Call& call) {
  const Rows n = read(call, false);
  const float eps = static_cast<float>(call.ctx().rms_norm_eps);
  const std::int64_t W = n.width, per = rows_per_task(W);
  std::vector<float> y(n.x.size());
  each_index((n.rows + per - 1) / per, call.ctx().threads, [&](std::int64_t task) {
    std::vector<float> sq(static_cast<std::size_t>(W));
    for (std::int64_t row = task * per; row < n.rows && row < (task + 1) * per; ++row) {
      const float* x = n.x.data() + row * W;
      float* out = y.data() + row * W;
      const float r = inverse_rms(x, W, eps, sq.data());
      for (std::int64_t i = 0; i < W; ++i) out[i] = (x[i] * r) * n.w[static_cast<std::size_t>(i)];
    }
  });
  return {{"y", f32_tensor(n.x_shape, std::move(y))}};
}

inline Tensors backward(const Call& call) {
  const Rows n = read(call, true);
  const float eps = static_cast<float>(call.ctx().rms_norm_eps);
  const std::int64_t W = n.width, per = rows_per_task(W);
  std::vector<float> dx(n.x.size()), inv(static_cast<std::size_t>(n.rows));
  each_index((n.rows + per - 1) / per, call.ctx().threads, [&](std::int64_t task) {
    std::vector<float> g(static_cast<std::size_t>(W)), scratch(static_cast<std::size_t>(W));
    for (std::int64_t row = task * per; row < n.rows && row < (task + 1) * per; ++row) {
      const float* x = n.x.data() + row * W;
      const float* dy = n.dy.data() + row * W;
      float* out = dx.data() + row * W;
      const float r = inverse_rms(x, W, eps, scratch.data());
      inv[static_cast<std::size_t>(row)] = r;
      for (std::int64_t i = 0; i < W; ++i) {
        g[static_cast<std::size_t>(i)] = dy[i] * n.w[static_cast<std::size_t>(i)];
        scratch[static_cast<std::size_t>(i)] = g[static_cast<std::size_t>(i)] * x[i];
      }
      const float coef = r * r * r * (sum(scratch.data(), W) / static_cast<float>(W));
      for (std::int64_t i = 0; i < W; ++i) out[i] = r * g[static_cast<std::size_t>(i)] - x[i] * coef;
    }
  });
  // dweight: a task owns a block of columns and sums them over all rows (column_sums), so the
  // inner loops stay contiguous and the order does not depend on the thread count.
  std::vector<float> dw(static_cast<std::size_t>(W), 0.0f);
  each_index((W + kColumns - 1) / kColumns, call.ctx().threads, [&](std::int64_t task) {
    const std::int64_t c0 = task * kColumns, cols = std::min(W - c0, kColumns);
    if (n.rows > 0) column_sums(n, inv, 0, n.rows, c0, cols, dw.data() + c0);
  });
  return {{"dx", f32_tensor(n.x_shape, std::move(dx))}, {"dweight", f32_tensor(n.w_shape, std::move(dw))}};
}

}  // namespace ws1::ref::norm
