// logp's FP32 reference: the selected log-softmax of each logits row.
//   logits [..., V] bf16, targets [...] int64 (each in [0, V))
//   logp [...] = logits[t, y] - logsumexp(logits[t]), max-subtracted, FP32 (log_softmax.hpp)
//   backward: dy.logp [...] float32 -> dlogits [..., V] = dy * (onehot(y) - softmax(logits[t]))
#include "log_softmax.hpp"

namespace ws1::ref {

Tensors logp_forward(const Call& call) { return selected_logp_forward(call, false); }

Tensors logp_backward(const Call& call) { return selected_logp_backward(call, false); }

}  // namespace ws1::ref
