// Internal to lib/naive: the eager-bf16 pieces several elementwise ops share.
//  - RMSNorm over the last dimension (rms_norm, and qk_norm per head), the no-upcast HF form
//      var = x.pow(2).mean(-1, keepdim=True); r = torch.rsqrt(var + eps); y = (x * r) * weight
//    and autograd through exactly those ops.
//  - SiLU and its backward kernel (silu, swiglu), as PyTorch's CPU/CUDA kernels evaluate them in
//    FP32: silu(x) = x / (1 + exp(-x)); silu_backward(dy, x) = dy * s * (1 + x * (1 - s)),
//    s = 1 / (1 + exp(-x)); one bf16 rounding each (the caller's).
//  - Same-shaped bf16 inputs read with lib/ref's checks (silu, swiglu).
//  - A parallel loop over the rows of a [rows, width] tensor (rms_norm, qk_norm, rope).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../ref/norm_inputs.hpp"
#include "support.hpp"

namespace ws1::naive {

// ---- SiLU ----

inline float silu_fp32(float x) { return x / (1.0f + std::exp(-x)); }
inline float silu_backward_fp32(float dy, float x) {
  const float s = 1.0f / (1.0f + std::exp(-x));
  return dy * s * (1.0f + x * (1.0f - s));
}

// The FP32 values of bf16 inputs `names` that all have the first one's shape (returned in
// `shape`), each refused as lib/ref's elementwise reference refuses it.
inline std::vector<std::vector<float>> same_shaped(const Call& call, std::initializer_list<std::string_view> names,
                                                  Shape& shape) {
  shape = call.tensor(*names.begin(), DType::kBF16).shape();
  std::vector<std::vector<float>> v;
  for (std::string_view name : names) {
    const Shape& s = call.tensor(name, DType::kBF16).shape();
    call.expect(s == shape, name, "shape " + ref::shape_text(s) + " (expected " + ref::shape_text(shape) + ")");
    v.push_back(call.floats(name));
  }
  return v;
}

// ---- rows ----

// body(row, scratch) for every row in [0, rows), rows handed out to `threads` workers in blocks
// of a few thousand elements; scratch: `width` floats of the block's own.
template <class F>
void each_row(std::int64_t rows, std::int64_t width, unsigned threads, F body) {
  const std::int64_t per = width >= 4096 ? 1 : 4096 / (width > 0 ? width : 1);
  ref::each_index((rows + per - 1) / per, threads, [&](std::int64_t task) {
    std::vector<float> scratch(static_cast<std::size_t>(width));
    for (std::int64_t row = task * per; row < rows && row < (task + 1) * per; ++row) body(row, scratch.data());
  });
}

// ---- RMSNorm ----
// Forward, per row x of width W (eps = float32(ctx.rms_norm_eps), a Python scalar: FP32 opmath):
//   sq = bf(x*x); var = bf(sum_fp32(sq) / W); r = bf(1/sqrt(bf(var + eps)))
//   h  = bf(x * r); y = bf(h * w)
// Backward, autograd node by node through that graph (dy bf16):
//   y = h * w    : gh = bf(dy * w); dweight = bf(sum over rows of bf(dy * h)) (MulBackward gives
//                  the bf16 product per element, then sum_to accumulates it in FP32)
//   h = x * r    : gx1 = bf(gh * r); gr = bf(sum_W(bf(gh * x)))   (r broadcasts over W)
//   r = rsqrt(v) : gv = bf(bf(-0.5 * gr) * bf(bf(r*r) * r))       (-0.5 * grad * result.pow(3); a
//                  bf16 pow(3) is base * base * base in bf16 arithmetic, CPU and CUDA alike)
//   v = var + eps: gv passes through
//   var = mean   : gsq = bf(gv / W)                               (expand, then div_ by W)
//   sq = x.pow(2): gx2 = bf(gsq * bf(2 * x))                      (grad * (2 * x.pow(1)))
//   dx = bf(gx1 + gx2)                                            (autograd accumulates x's two paths)
namespace norm {

// lib/ref's RMSNorm inputs and checks: x bf16 of rank >= 1, weight bf16 [W], dy.y shaped like x.
using ref::norm::read;
using ref::norm::Rows;

// r = bf(rsqrt(bf(var + eps))) of one row, var = bf(mean(bf(x*x))); `sq` is scratch of width floats.
inline float inverse_rms(const float* x, std::int64_t width, float eps, float* sq) {
  for (std::int64_t i = 0; i < width; ++i) sq[i] = bf(x[i] * x[i]);
  const float var = bf(sum_fp32(sq, width) / static_cast<float>(width));
  return bf(1.0f / std::sqrt(bf(var + eps)));
}

// out[c] = sum_fp32 of column c < cols over `rows` rows of the row-major m (row stride
// `stride`): the same split and order as sum_fp32 on the column, every column at once.
inline constexpr std::int64_t kColumns = 64;
inline void column_sums(const float* m, std::int64_t stride, std::int64_t rows, std::int64_t cols, float* out) {
  std::fill(out, out + cols, 0.0f);
  if (rows <= 32) {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) out[c] += m[r * stride + c];
    return;
  }
  float right[kColumns];
  const std::int64_t half = rows / 2;
  column_sums(m, stride, half, cols, out);
  column_sums(m + half * stride, stride, rows - half, cols, right);
  for (std::int64_t c = 0; c < cols; ++c) out[c] += right[c];
}

inline Tensors forward(const Call& call) {
  const Rows n = read(call, false);
  const float eps = static_cast<float>(call.ctx().rms_norm_eps);
  const std::int64_t W = n.width;
  std::vector<float> y(n.x.size());
  each_row(n.rows, W, call.ctx().threads, [&](std::int64_t row, float* scratch) {
    const float* x = n.x.data() + row * W;
    float* out = y.data() + row * W;
    const float r = inverse_rms(x, W, eps, scratch);
    for (std::int64_t i = 0; i < W; ++i) out[i] = bf(bf(x[i] * r) * n.w[static_cast<std::size_t>(i)]);
  });
  return {{"y", bf16_tensor(n.x_shape, y)}};
}

inline Tensors backward(const Call& call) {
  const Rows n = read(call, true);
  const float eps = static_cast<float>(call.ctx().rms_norm_eps);
  const std::int64_t W = n.width;
  const auto fw = static_cast<float>(W);
  std::vector<float> dx(n.x.size());
  std::vector<float> dyh(n.x.size());  // dweight's per-element terms bf(dy * h)
  each_row(n.rows, W, call.ctx().threads, [&](std::int64_t row, float* scratch) {
    const float* x = n.x.data() + row * W;
    const float* dy = n.dy.data() + row * W;
    float* out = dx.data() + row * W;  // holds gh = bf(dy * w) until the end
    const float r = inverse_rms(x, W, eps, scratch);
    for (std::int64_t i = 0; i < W; ++i) {
      dyh[static_cast<std::size_t>(row * W + i)] = bf(dy[i] * bf(x[i] * r));
      out[i] = bf(dy[i] * n.w[static_cast<std::size_t>(i)]);
      scratch[i] = bf(out[i] * x[i]);
    }
    const float gr = bf(sum_fp32(scratch, W));
    const float gv = bf(bf(-0.5f * gr) * bf(bf(r * r) * r));
    const float gsq = bf(gv / fw);
    for (std::int64_t i = 0; i < W; ++i) out[i] = bf(bf(out[i] * r) + bf(gsq * bf(2.0f * x[i])));
  });
  // A task owns a block of columns: the inner loops stay contiguous over a row.
  std::vector<float> dw(static_cast<std::size_t>(W));
  ref::each_index((W + kColumns - 1) / kColumns, call.ctx().threads, [&](std::int64_t task) {
    const std::int64_t c0 = task * kColumns, cols = std::min(W - c0, kColumns);
    column_sums(dyh.data() + c0, W, n.rows, cols, dw.data() + c0);
    for (std::int64_t i = c0; i < c0 + cols; ++i) dw[static_cast<std::size_t>(i)] = bf(dw[static_cast<std::size_t>(i)]);
  });
  return {{"dx", bf16_tensor(n.x_shape, dx)}, {"dweight", bf16_tensor(n.w_shape, dw)}};
}

}  // namespace norm
}  // namespace ws1::naive
