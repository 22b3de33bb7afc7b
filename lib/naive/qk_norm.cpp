// qk_norm's naive bf16 definition: rms_norm's eager ops (norm.hpp) over head_dim, every head of
// every token its own row, x [..., D] (fixture [T, H, D]), one weight [D] for all heads:
//   y = bf(bf(x * r) * w) with r = bf(rsqrt(bf(var + eps))), var = bf(mean(bf(x*x))) per row
// backward: rms_norm's autograd chain; dweight sums bf(dy * bf(x*r)) over tokens x heads in FP32.
// As lib/ref (whose check it runs, ../ref/norm_inputs.hpp), x's last dimension must be the
// run's head_dim when it is known (a flattened [T, H*D] is refused, not normalised over the
// whole width).
#include "norm.hpp"

namespace ws1::naive {

Tensors qk_norm_forward(const Call& call) {
  ref::norm::check_head_dim(call);
  return norm::forward(call);
}

Tensors qk_norm_backward(const Call& call) {
  ref::norm::check_head_dim(call);
  return norm::backward(call);
}

}  // namespace ws1::naive
