// qk_norm's FP32 reference: RMSNorm over head_dim for every head of every token, x [..., D]
// (fixture [T, H, D]) with one weight [D] shared by all heads; y = x * rsqrt(mean(x^2) + eps)
// * w per D-wide row, backward dx and dweight summed over all rows (tokens x heads). The
// arithmetic is norm.hpp's. When the run knows head_dim, x's last dimension must be it, so a
// flattened [T, H*D] input is refused rather than normalised over the whole width.
#include "norm.hpp"

namespace ws1::ref {

Tensors qk_norm_forward(const Call& call) {
  norm::check_head_dim(call);
  return norm::forward(call);
}

Tensors qk_norm_backward(const Call& call) {
  norm::check_head_dim(call);
  return norm::backward(call);
}

}  // namespace ws1::ref
