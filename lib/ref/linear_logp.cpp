// linear_logp's FP32 reference: logp of the logits hidden @ weight^T, materialised in full.
//   hidden [..., H] bf16, weight [V, H] bf16, targets [...] int64 (each in [0, V))
//   z = hidden @ weight^T [T, V] in FP32 (T = the product of hidden's leading dimensions)
//   logp [...] = z[t, y] - logsumexp(z[t]), max-subtracted, FP32 (log_softmax.hpp)
//   backward: dy.logp [...] float32; G = dy * (onehot(y) - softmax(z)) [T, V];
//   dhidden [..., H] = G @ weight (sum over V), dweight [V, H] = G^T @ hidden (sum over T)
// The candidate never holds [T, V]; the reference does (T * V floats) because that is the
// definition, and it is only ever compared, not deployed.
#include "log_softmax.hpp"
#include "logp_inputs.hpp"

namespace ws1::ref {

namespace {

// z [T, V] = hidden @ weight^T in FP32 (weight [V, H] is the [n, k] layout).
std::vector<float> logits(const LinearLogpInputs& p, unsigned threads) {
  std::vector<float> z(static_cast<std::size_t>(p.rows * p.vocab));
  matmul(p.hidden.data(), p.weight.data(), z.data(), p.rows, p.width, p.vocab, true, threads);
  return z;
}

}  // namespace

Tensors linear_logp_forward(const Call& call) {
  const LinearLogpInputs p = read_linear_logp_inputs(call, false);
  const unsigned threads = call.ctx().threads;
  std::vector<float> z = logits(p, threads);
  std::vector<float> logp = selected_logp_rows(z, p.rows, p.vocab, p.targets, {}, threads);
  return {{"logp", f32_tensor(p.lead, std::move(logp))}};
}

Tensors linear_logp_backward(const Call& call) {
  LinearLogpInputs p = read_linear_logp_inputs(call, true);
  const unsigned threads = call.ctx().threads;
  std::vector<float> g = logits(p, threads);
  selected_logp_gradient_rows(g, p.rows, p.vocab, p.targets, {}, p.dy, threads);
  // dhidden[T, H] = G[T, V] @ weight[V, H].
  std::vector<float> dh(static_cast<std::size_t>(p.rows * p.width));
  matmul(g.data(), p.weight.data(), dh.data(), p.rows, p.vocab, p.width, false, threads);
  // dweight[V, H] = G^T[V, T] @ hidden[T, H]. The weight and G, once transposed, are freed before
  // dweight's V x H floats are allocated.
  std::vector<float>().swap(p.weight);
  const std::vector<float> gt = transposed(g, p.rows, p.vocab);
  std::vector<float>().swap(g);
  Tensor dw(DType::kF32, {p.vocab, p.width});  // straight into the output (no V x H copy)
  matmul(gt.data(), p.hidden.data(), dw.data<float>(), p.vocab, p.rows, p.width, false, threads);
  Shape dh_shape = p.lead;
  dh_shape.push_back(p.width);
  return {{"dhidden", f32_tensor(dh_shape, std::move(dh))}, {"dweight", std::move(dw)}};
}

}  // namespace ws1::ref
