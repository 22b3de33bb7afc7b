// rms_norm's naive bf16 definition: HF's RMSNorm with no upcast, x [..., W], weight [W]:
//   y = bf(bf(x * r) * w) with r = bf(rsqrt(bf(var + eps))), var = bf(mean(bf(x*x)))
// backward by autograd through those ops (norm.hpp writes out the chain):
//   dx = bf(bf(bf(dy*w) * r) + bf(gsq * bf(2x))), gsq = bf(bf(bf(-0.5 * gr) * bf(bf(r*r) * r)) / W),
//   gr = bf(sum_W(bf(bf(dy*w) * x))); dweight = bf(sum_rows(bf(dy * bf(x*r)))).
#include "norm.hpp"

namespace ws1::naive {

Tensors rms_norm_forward(const Call& call) { return norm::forward(call); }

Tensors rms_norm_backward(const Call& call) { return norm::backward(call); }

}  // namespace ws1::naive
