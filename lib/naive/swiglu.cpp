// swiglu's naive bf16 definition: F.silu(gate) * up, two eager ops (the gate is the silu'd input):
//   a = bf(silu(gate)),  y = bf(a * up)
// backward by autograd: MulBackward, then SiluBackward's kernel (norm.hpp) on gate:
//   dup = bf(dy * a),  ga = bf(dy * up),  dgate = bf(ga * s * (1 + gate * (1 - s))), s = sigmoid(gate)
#include "norm.hpp"

namespace ws1::naive {

Tensors swiglu_forward(const Call& call) {
  Shape shape;
  const auto v = same_shaped(call, {"gate", "up"}, shape);
  const std::vector<float>&gate = v[0], &up = v[1];
  std::vector<float> y(gate.size());
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = bf(bf(silu_fp32(gate[i])) * up[i]);
  return {{"y", bf16_tensor(shape, y)}};
}

Tensors swiglu_backward(const Call& call) {
  Shape shape;
  const auto v = same_shaped(call, {"gate", "up", "dy.y"}, shape);
  const std::vector<float>&gate = v[0], &up = v[1], &dy = v[2];
  std::vector<float> dgate(gate.size()), dup(gate.size());
  for (std::size_t i = 0; i < gate.size(); ++i) {
    dup[i] = bf(dy[i] * bf(silu_fp32(gate[i])));
    dgate[i] = bf(silu_backward_fp32(bf(dy[i] * up[i]), gate[i]));
  }
  return {{"dgate", bf16_tensor(shape, dgate)}, {"dup", bf16_tensor(shape, dup)}};
}

}  // namespace ws1::naive
