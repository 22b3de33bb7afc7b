// swiglu's cpu_bf16 candidate (DESIGN §6, NOTES §c): y = silu(gate) * up, elementwise; gate
// and up have the same shape (fixture [T, I]). The FP32 reference is lib/ref/swiglu.cpp.
//
// Per element, in FP32 and in this order, rounded to bf16 once (silu(gate) is not rounded on
// the way):
//   s = 1 / (1 + exp(-g));   y = (g * s) * u
//
// Backward (analytic, same definition), per element in FP32, one bf16 rounding each:
//   dgate = (dy * u) * (s * (1 + g * (1 - s)))
//   dup   = dy * (g * s)
// No reduction anywhere.
#include "elementwise.hpp"

namespace ws1::ops {
namespace {

Result<Tensors> forward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return guarded(op, [&] {
    const auto [gp, up] = pointwise_inputs<2>(op, in, {"gate", "up"});
    const Tensor &gt = *gp, &ut = *up;
    const std::vector<float> g = to_f32(gt), u = to_f32(ut);
    return Tensors{{"y", map_elements(gt.shape(), ctx.threads, [&](std::int64_t i) {
                      const auto k = static_cast<std::size_t>(i);
                      return (g[k] * sigmoid_f32(g[k])) * u[k];
                    })}};
  });
}

Result<Tensors> backward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return guarded(op, [&] {
    const auto [gp, up, dyp] = pointwise_inputs<3>(op, in, {"gate", "up", "dy.y"});
    const Tensor &gt = *gp, &ut = *up, &dyt = *dyp;
    const std::vector<float> g = to_f32(gt), u = to_f32(ut), dy = to_f32(dyt);
    Tensor dgate = map_elements(gt.shape(), ctx.threads, [&](std::int64_t i) {
      const auto k = static_cast<std::size_t>(i);
      const float s = sigmoid_f32(g[k]);
      return (dy[k] * u[k]) * (s * (1.0f + g[k] * (1.0f - s)));
    });
    Tensor dup = map_elements(gt.shape(), ctx.threads, [&](std::int64_t i) {
      const auto k = static_cast<std::size_t>(i);
      return dy[k] * (g[k] * sigmoid_f32(g[k]));
    });
    return Tensors{{"dgate", std::move(dgate)}, {"dup", std::move(dup)}};
  });
}

}  // namespace

const Op& swiglu_op() {
  static const ElementwiseOp op("swiglu", {{"y", DType::kBF16}},
                         {{"dgate", DType::kBF16}, {"dup", DType::kBF16}}, forward, backward);
  return op;
}

}  // namespace ws1::ops
