// silu's cpu_bf16 candidate (DESIGN §6, NOTES §c): y = x * sigmoid(x), elementwise, any shape
// (fixture x [T, I]); the FP32 reference is lib/ref/silu.cpp.
//
// Per element, in FP32 and in this order:
//   s = 1 / (1 + exp(-x));   y = x * s
// rounded to bf16 once (no bf16 intermediate: s is never rounded).
//
// Backward (analytic, same definition), per element in FP32, one bf16 rounding:
//   dx = dy * (s * (1 + x * (1 - s)))
// No reduction anywhere, so nothing depends on the row count or thread count.
#include "elementwise.hpp"

namespace ws1::ops {
namespace {

Result<Tensors> forward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return guarded(op, [&] {
    const Tensor& xt = *pointwise_inputs<1>(op, in, {"x"})[0];
    const std::vector<float> x = to_f32(xt);
    return Tensors{{"y", map_elements(xt.shape(), ctx.threads, [&](std::int64_t i) {
                      const float xi = x[static_cast<std::size_t>(i)];
                      return xi * sigmoid_f32(xi);
                    })}};
  });
}

Result<Tensors> backward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return guarded(op, [&] {
    const auto [xp, dyp] = pointwise_inputs<2>(op, in, {"x", "dy.y"});
    const Tensor &xt = *xp, &dyt = *dyp;
    const std::vector<float> x = to_f32(xt), dy = to_f32(dyt);
    return Tensors{{"dx", map_elements(xt.shape(), ctx.threads, [&](std::int64_t i) {
                      const auto k = static_cast<std::size_t>(i);
                      const float s = sigmoid_f32(x[k]);
                      return dy[k] * (s * (1.0f + x[k] * (1.0f - s)));
                    })}};
  });
}

}  // namespace

const Op& silu_op() {
  static const ElementwiseOp op("silu", {{"y", DType::kBF16}}, {{"dx", DType::kBF16}}, forward, backward);
  return op;
}

}  // namespace ws1::ops
