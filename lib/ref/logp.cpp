// logp's FP32 reference: the selected log-softmax of each logits row.
//   logits [..., V] bf16, targets [...] int64 (each in [0, V))
//   logp [...] = logits[t, y] - logsumexp(logits[t]), max-subtracted, FP32 (log_softmax.hpp)
//   backward: dy.logp [...] float32 -> dlogits [..., V] = dy * (onehot(y) - softmax(logits[t]))
#include "log_softmax.hpp"

namespace ws1::ref {

Tensors logp_forward(const Call& call) {
  LogitRows x = read_logit_rows(call, false, false);
  std::vector<float> logp = selected_logp_rows(x.logits, x.rows, x.vocab, x.targets, x.skip, call.ctx().threads);
  return {{"logp", f32_tensor(x.lead, std::move(logp))}};
}

Tensors logp_backward(const Call& call) {
  LogitRows x = read_logit_rows(call, false, true);
  Shape shape = x.lead;
  shape.push_back(x.vocab);
  // The widened logits become the gradient in place: no second [T, V] buffer.
  selected_logp_gradient_rows(x.logits, x.rows, x.vocab, x.targets, x.skip, x.dy, call.ctx().threads);
  return {{"dlogits", f32_tensor(shape, std::move(x.logits))}};
}

}  // namespace ws1::ref
