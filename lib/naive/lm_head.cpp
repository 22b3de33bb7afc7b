// lm_head, eager bf16 (lib/ref/lm_head.cpp: logits = hidden @ weight^T, no bias):
//   forward:  logits = F.linear(hidden, weight)   bf(FP32 sum over H), one rounding per logit
//   backward: dhidden = bf(dy.logits @ weight), dweight = bf(dy.logits^T @ hidden)
//             (hidden's leading dimensions flattened to T rows, as F.linear's backward does)
// The F.linear pair is log_softmax.hpp's, shared with linear_logp.
#include "../ref/gemm_inputs.hpp"
#include "log_softmax.hpp"

namespace ws1::naive {

Tensors lm_head_forward(const Call& call) {
  const ref::LmHeadInputs x = ref::read_lm_head_inputs(call, false);
  const std::vector<float> z = linear_bf16(x.hidden, x.weight, x.rows, x.width, x.vocab, call.ctx().threads);
  return {{"logits", bf16_tensor(x.logits_shape, z)}};
}

Tensors lm_head_backward(const Call& call) {
  ref::LmHeadInputs x = ref::read_lm_head_inputs(call, true);
  const LinearGradients d =
      linear_bf16_backward(std::move(x.dy), x.hidden, x.weight, x.rows, x.width, x.vocab, call.ctx().threads);
  return {{"dhidden", bf16_tensor(x.hidden_shape, d.dhidden)},
          {"dweight", bf16_tensor({x.vocab, x.width}, d.dweight)}};
}

}  // namespace ws1::naive
