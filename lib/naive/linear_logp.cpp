// linear_logp, eager bf16 (lib/ref/linear_logp.cpp): F.linear, then logp's graph on its bf16
// logits, materialised in full [T, V] as eager does:
//   forward:  z = F.linear(hidden, weight)          bf(FP32 sum over H)   [T, V] bf16
//             out = F.log_softmax(z, -1)             bf16
//             logp = out.gather(-1, targets).float()
//   backward: G = bf(g - exp(out) * g.sum(-1)), g = scatter of bf(dy.logp)   [T, V] bf16
//             dhidden = bf(G @ weight), dweight = bf(G^T @ hidden)
// The log-softmax graph and the F.linear pair are log_softmax.hpp's.
#include "../ref/logp_inputs.hpp"
#include "log_softmax.hpp"

namespace ws1::naive {

namespace {

std::vector<float> logits(const ref::LinearLogpInputs& p, unsigned threads) {
  return linear_bf16(p.hidden, p.weight, p.rows, p.width, p.vocab, threads);
}

}  // namespace

Tensors linear_logp_forward(const Call& call) {
  const ref::LinearLogpInputs p = ref::read_linear_logp_inputs(call, false);
  const unsigned threads = call.ctx().threads;
  return {{"logp", widened_tensor(p.lead, selected_logp(logits(p, threads), p, threads))}};
}

Tensors linear_logp_backward(const Call& call) {
  const ref::LinearLogpInputs p = ref::read_linear_logp_inputs(call, true);
  const unsigned threads = call.ctx().threads;
  // The logits are dropped once G exists (G is the [T, V] buffer the linear backward consumes).
  std::vector<float> g = selected_logp_gradient(logits(p, threads), p, p.dy, threads);
  const LinearGradients d =
      linear_bf16_backward(std::move(g), p.hidden, p.weight, p.rows, p.width, p.vocab, threads);
  Shape dh_shape = p.lead;
  dh_shape.push_back(p.width);
  return {{"dhidden", bf16_tensor(dh_shape, d.dhidden)}, {"dweight", bf16_tensor({p.vocab, p.width}, d.dweight)}};
}

}  // namespace ws1::naive
