// rms_norm / qk_norm dweight restated from its definitions (ws1/op_orders.hpp,
// docs/decisions.md D24) independently of lib/ops, for the CPU and GPU tests of its order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "rms_norm.hpp"
#include "ws1/numeric.hpp"
#include "ws1/op.hpp"
#include "ws1/tensor.hpp"

namespace ws1_test {

// x, dy bf16 [..., width], rows = numel / width. The candidate's FP32 sums per column: blocks
// of kDwRowBlock rows, each a chain from +0, added in block order from +0. A term is
// fma(float(dy*x), rstd, acc) with rstd from the 32-wide chunked sum of squares.
inline std::vector<float> restated_dweight(const ws1::Tensor& xt, const ws1::Tensor& dyt, float eps) {
  const auto values = [](const ws1::Tensor& t) {
    const ws1::Tensor c = t.contiguous();
    std::vector<float> v(static_cast<std::size_t>(c.numel()));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = ws1::from_bf16(ws1::bf16{c.data<std::uint16_t>()[i]});
    return v;
  };
  const std::vector<float> x = values(xt), dy = values(dyt);
  const std::int64_t width = xt.shape().back();
  const std::int64_t rows = width == 0 ? 0 : xt.numel() / width;
  std::vector<float> rstd(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    float total = 0.0f;
    for (std::int64_t c0 = 0; c0 < width; c0 += 32) {
      float part = 0.0f;
      for (std::int64_t i = c0; i < std::min(width, c0 + 32); ++i)
        part = std::fma(x[r * width + i], x[r * width + i], part);
      total = total + part;
    }
    rstd[static_cast<std::size_t>(r)] = 1.0f / std::sqrt(total / static_cast<float>(width) + eps);
  }
  const std::int64_t block = ws1::ops::kDwRowBlock;
  std::vector<float> dw(static_cast<std::size_t>(width));
  for (std::int64_t i = 0; i < width; ++i) {
    float s = 0.0f;
    for (std::int64_t r0 = 0; r0 < rows; r0 += block) {
      float acc = 0.0f;
      for (std::int64_t r = r0; r < std::min(rows, r0 + block); ++r) {
        const float prod = dy[r * width + i] * x[r * width + i];  // rounded to float first
        acc = std::fma(prod, rstd[static_cast<std::size_t>(r)], acc);
      }
      s = s + acc;
    }
    dw[static_cast<std::size_t>(i)] = s;
  }
  return dw;
}

// Inputs on which the blocked order loses the whole sum: x = 1 (every row's rstd is the same
// rs), dy = +2^26 in row 0, -2^26 in row kDwRowBlock, 1 elsewhere; 2 * kDwRowBlock rows of
// `width`. The exact sum is 2 * (kDwRowBlock - 1) * rs, about 510. A chain holding +-2^26*rs
// (ulp 4) absorbs each +rs: one chain over all rows keeps the second block's ones (about 255);
// the blocks' partials 2^26*rs and -2^26*rs add to +0.
inline ws1::Tensors absorbing_dweight_inputs(std::int64_t width, const ws1::Tensor& weight) {
  const std::int64_t block = ws1::ops::kDwRowBlock, rows = 2 * block;
  ws1::Tensor x(ws1::DType::kBF16, {rows, width}), dy(ws1::DType::kBF16, {rows, width});
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < width; ++i) {
      x.data<std::uint16_t>()[r * width + i] = ws1::to_bf16(1.0f).bits;
      const float d = r == 0 ? std::ldexp(1.0f, 26) : r == block ? -std::ldexp(1.0f, 26) : 1.0f;
      dy.data<std::uint16_t>()[r * width + i] = ws1::to_bf16(d).bits;
    }
  return {{"x", x}, {"weight", weight}, {"dy.y", dy}};
}

}  // namespace ws1_test
