// lm_head's FP32 reference: logits[..., V] = hidden[..., H] @ weight[V, H]^T (no bias), the bf16
// inputs widened to FP32, FP32 out; hidden's leading dimensions are rows (T = their product).
// Backward (dy.logits [..., V] bf16): dhidden = dy @ weight (sum over V),
// dweight = dy^T @ hidden (sum over the T rows).
#include "gemm_inputs.hpp"

namespace ws1::ref {

Tensors lm_head_forward(const Call& call) {
  const LmHeadInputs x = read_lm_head_inputs(call, false);
  std::vector<float> logits(static_cast<std::size_t>(x.rows * x.vocab));
  // weight [V, H] is the [n, k] layout of W^T.
  matmul(x.hidden.data(), x.weight.data(), logits.data(), x.rows, x.width, x.vocab, true, call.ctx().threads);
  return {{"logits", f32_tensor(x.logits_shape, std::move(logits))}};
}

Tensors lm_head_backward(const Call& call) {
  LmHeadInputs x = read_lm_head_inputs(call, true);
  const unsigned threads = call.ctx().threads;
  // dhidden[T, H] = dy[T, V] @ weight[V, H].
  std::vector<float> dh(static_cast<std::size_t>(x.rows * x.width));
  matmul(x.dy.data(), x.weight.data(), dh.data(), x.rows, x.vocab, x.width, false, threads);
  // dweight[V, H] = dy^T[V, T] @ hidden[T, H]. The weight (V x H floats) and dy, once transposed,
  // are freed before dweight's V x H floats are allocated: the peak holds one of them, not two.
  std::vector<float>().swap(x.weight);
  const std::vector<float> dyt = transposed(x.dy, x.rows, x.vocab);
  std::vector<float>().swap(x.dy);
  // Straight into the output tensor: a V x H vector copied into one would hold both at once.
  Tensor dw(DType::kF32, {x.vocab, x.width});
  matmul(dyt.data(), x.hidden.data(), dw.data<float>(), x.vocab, x.rows, x.width, false, threads);
  return {{"dhidden", f32_tensor(x.hidden_shape, std::move(dh))}, {"dweight", std::move(dw)}};
}

}  // namespace ws1::ref
