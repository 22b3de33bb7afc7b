// silu's FP32 reference: y = x * sigmoid(x), sigmoid(x) = 1 / (1 + exp(-x)), per element;
// backward dx = dy * sigmoid(x) * (1 + x * (1 - sigmoid(x))), the derivative of the same
// definition. x any shape; dy.y the shape of x.
#include <cmath>

#include "elementwise.hpp"

namespace ws1::ref {

Tensors silu_forward(const Call& call) {
  return {{"y", elementwise(call, {"x"}, [](const float* v) { return v[0] * sigmoid(v[0]); })}};
}

Tensors silu_backward(const Call& call) {
  return {{"dx", elementwise(call, {"x", "dy.y"}, [](const float* v) {
             const float x = v[0], s = sigmoid(x);
             return v[1] * (s * (1.0f + x * (1.0f - s)));
           })}};
}

}  // namespace ws1::ref
