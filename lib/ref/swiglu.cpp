// swiglu's FP32 reference: y = silu(gate) * up, silu(g) = g * sigmoid(g), per element;
// backward dgate = (dy * up) * silu'(gate) with silu'(g) = s * (1 + g * (1 - s)), s =
// sigmoid(g), and dup = dy * silu(gate). gate, up and dy.y of one shape.
#include "elementwise.hpp"

namespace ws1::ref {

Tensors swiglu_forward(const Call& call) {
  return {{"y", elementwise(call, {"gate", "up"}, [](const float* v) { return v[0] * sigmoid(v[0]) * v[1]; })}};
}

Tensors swiglu_backward(const Call& call) {
  // dy * up times silu'(gate), and dy times silu(gate).
  const auto dgate = [](const float* v) {
    const float g = v[0], s = sigmoid(g);
    return (v[2] * v[1]) * (s * (1.0f + g * (1.0f - s)));
  };
  const auto dup = [](const float* v) { return v[2] * (v[0] * sigmoid(v[0])); };
  return {{"dgate", elementwise(call, {"gate", "up", "dy.y"}, dgate)},
          {"dup", elementwise(call, {"gate", "up", "dy.y"}, dup)}};
}

}  // namespace ws1::ref
