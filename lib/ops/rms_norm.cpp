// rms_norm's cpu_bf16 candidate (DESIGN §6; spec §3.1, §9.6): y = x * rsqrt(mean(x^2) + eps) * w
// over the last dim; the FP32 reference is lib/ref/rms_norm.cpp.
//
// Statistic: sum of squares in fixed 32-wide chunks (op_support), so a row's result does not
// depend on how many rows are in the call. The FP32 arithmetic is rounded to bf16 once
// ("kernel" order) or, in "hf" order, normed rounded to bf16 first and then multiplied by w
// with a second rounding (Hugging Face Qwen3RMSNorm); the contract picks the order.
//
// Backward (same FP32 definition): with r = rsqrt(mean(x^2)+eps) and g = dy*w,
//   dx = r*g - x * r^3 * sum(g*x) / W,      dweight = sum over rows of dy*x*r.
// dweight is a sum over rows per column, each row adding fma(float(dy*x), rstd, acc), in fixed
// blocks of kDwRowBlock rows, the block partials then added in block order in FP32 and rounded
// once (ws1/op_orders.hpp; docs/decisions.md D24: the GPU runs the blocks in parallel). It is
// deterministic and depends on the rows only; the HF order's backward uses the same formula
// (rounding is not differentiated).
#include "rms_norm.hpp"

#include <algorithm>
#include <cmath>

#include "op_support.hpp"
#include "ws1/numeric.hpp"

namespace ws1::ops {
namespace {

float row_rstd(const float* x, std::int64_t width, float eps) {
  const float mean = chunked_sum_squares(x, width) / static_cast<float>(width);
  return 1.0f / std::sqrt(mean + eps);
}

float dot_chunked(const float* a, const float* b, std::int64_t n) {
  // Same fixed chunking as the statistic.
  constexpr std::int64_t kChunk = 32;
  float total = 0.0f;
  for (std::int64_t c = 0; c < n; c += kChunk) {
    float part = 0.0f;
    const std::int64_t end = std::min(n, c + kChunk);
    for (std::int64_t i = c; i < end; ++i) part = std::fma(a[i], b[i], part);
    total += part;
  }
  return total;
}

}  // namespace

NormInputs check_norm_inputs(std::string_view op, const Tensors& in, bool backward) {
  NormInputs s;
  s.x = &input(in, op, "x", DType::kBF16);
  s.weight = &input(in, op, "weight", DType::kBF16, 1);
  if (backward) s.dy = &input(in, op, "dy.y", DType::kBF16);
  require(s.x->dim() >= 1, op, "x", "needs at least one dimension");
  s.width = s.x->shape().back();
  require(s.weight->shape()[0] == s.width, op, "weight",
          "shape " + shape_string(s.weight->shape()) + " does not match x's last dimension " +
              std::to_string(s.width));
  if (backward) require(s.dy->shape() == s.x->shape(), op, "dy.y", "shape differs from x");
  s.rows = s.width == 0 ? 0 : s.x->numel() / s.width;
  return s;
}

Result<Tensors> rms_norm_forward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return guarded(op, [&] {
    const NormInputs s = check_norm_inputs(op, in, false);
    const Tensor &xt = *s.x, &wt = *s.weight;
    const std::vector<float> x = to_f32(xt), w = to_f32(wt);
    const float eps = static_cast<float>(ctx.rms_norm_eps);
    const bool hf = ctx.rms_norm_order == RmsNormOrder::kHf;
    std::vector<float> y(x.size());
    parallel_for(s.rows, ctx.threads, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        const float* xr = x.data() + r * s.width;
        float* yr = y.data() + r * s.width;
        const float rstd = row_rstd(xr, s.width, eps);
        for (std::int64_t i = 0; i < s.width; ++i) {
          const float normed = xr[i] * rstd;
          if (hf)
            yr[i] = round_bf16(round_bf16(normed) * w[i]);
          else
            yr[i] = normed * w[i];
        }
      }
    });
    return Tensors{{"y", bf16_tensor(xt.shape(), y)}};
  });
}

Result<Tensors> rms_norm_backward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return guarded(op, [&] {
    const NormInputs s = check_norm_inputs(op, in, true);
    const Tensor &xt = *s.x, &wt = *s.weight, &dyt = *s.dy;
    const std::vector<float> x = to_f32(xt), w = to_f32(wt), dy = to_f32(dyt);
    const float eps = static_cast<float>(ctx.rms_norm_eps);
    const float inv_width = 1.0f / static_cast<float>(s.width);
    std::vector<float> dx(x.size()), rstd(static_cast<std::size_t>(s.rows));
    parallel_for(s.rows, ctx.threads, [&](std::int64_t b, std::int64_t e) {
      std::vector<float> g(static_cast<std::size_t>(s.width));
      for (std::int64_t r = b; r < e; ++r) {
        const float* xr = x.data() + r * s.width;
        const float* dyr = dy.data() + r * s.width;
        const float rs = row_rstd(xr, s.width, eps);
        rstd[static_cast<std::size_t>(r)] = rs;
        for (std::int64_t i = 0; i < s.width; ++i) g[static_cast<std::size_t>(i)] = dyr[i] * w[i];
        const float coef = rs * rs * rs * dot_chunked(g.data(), xr, s.width) * inv_width;
        for (std::int64_t i = 0; i < s.width; ++i)
          dx[r * s.width + i] = rs * g[static_cast<std::size_t>(i)] - xr[i] * coef;
      }
    });
    std::vector<float> dw(static_cast<std::size_t>(s.width));
    // Rows [r0, r1) of column i: acc = fma(float(dy*x), rstd, acc) left to right from +0.
    const auto column_chain = [&](std::int64_t i, std::int64_t r0, std::int64_t r1) {
      float acc = 0.0f;
      for (std::int64_t r = r0; r < r1; ++r)
        acc = std::fma(dy[r * s.width + i] * x[r * s.width + i], rstd[static_cast<std::size_t>(r)], acc);
      return acc;
    };
    parallel_for(s.width, ctx.threads, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) {
        float sum = 0.0f;
        for (std::int64_t r0 = 0; r0 < s.rows; r0 += kDwRowBlock)
          sum = sum + column_chain(i, r0, std::min(s.rows, r0 + kDwRowBlock));
        dw[static_cast<std::size_t>(i)] = sum;
      }
    });
    return Tensors{{"dx", bf16_tensor(xt.shape(), dx)}, {"dweight", bf16_tensor(wt.shape(), dw)}};
  });
}

namespace {

class RmsNorm final : public Op {
 public:
  RmsNorm() : Op(*find_op("rms_norm")) {}
  std::vector<TensorDecl> outputs() const override { return {{"y", DType::kBF16}}; }
  std::vector<TensorDecl> gradients() const override {
    return {{"dx", DType::kBF16}, {"dweight", DType::kBF16}};
  }
  Result<Tensors> cpu_forward(const Tensors& in, const OpContext& ctx) const override {
    return rms_norm_forward(name(), in, ctx);
  }
  Result<Tensors> cpu_backward(const Tensors& in, const OpContext& ctx) const override {
    return rms_norm_backward(name(), in, ctx);
  }
};

}  // namespace

const Op& rms_norm_op() {
  static const RmsNorm op;
  return op;
}

}  // namespace ws1::ops
