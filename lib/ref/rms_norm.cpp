// rms_norm's FP32 reference: y = x * rsqrt(mean(x^2) + eps) * w over the last dimension of
// x [..., W], weight [W]; backward dx and dweight (summed over all rows). The arithmetic and
// its summation orders are norm.hpp's.
#include "norm.hpp"

namespace ws1::ref {

Tensors rms_norm_forward(const Call& call) { return norm::forward(call); }

Tensors rms_norm_backward(const Call& call) { return norm::backward(call); }

}  // namespace ws1::ref
