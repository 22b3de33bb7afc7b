// silu's naive bf16 definition: F.silu on a bf16 tensor is one kernel, its FP32 value rounded once:
//   y  = bf(silu(x)),               silu(x) = x / (1 + exp(-x)) in FP32 (norm.hpp)
// backward, SiluBackward's one kernel:
//   dx = bf(dy * s * (1 + x * (1 - s))), s = 1 / (1 + exp(-x)) in FP32
#include "norm.hpp"

namespace ws1::naive {

Tensors silu_forward(const Call& call) {
  Shape shape;
  std::vector<float> y = same_shaped(call, {"x"}, shape)[0];
  for (float& v : y) v = silu_fp32(v);
  return {{"y", bf16_tensor(shape, y)}};
}

Tensors silu_backward(const Call& call) {
  Shape shape;
  const auto v = same_shaped(call, {"x", "dy.y"}, shape);
  const std::vector<float>&x = v[0], &dy = v[1];
  std::vector<float> dx(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) dx[i] = silu_backward_fp32(dy[i], x[i]);
  return {{"dx", bf16_tensor(shape, dx)}};
}

}  // namespace ws1::naive
