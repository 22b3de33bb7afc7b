// lm_head's FP32 reference: logits[..., V] = hidden[..., H] @ weight[V, H]^T (no bias), the bf16
// inputs widened to FP32, FP32 out; hidden's leading dimensions are rows (T = their product).
// Backward (dy.logits [..., V] bf16): dhidden = dy @ weight (sum over V),
// dweight = dy^T @ hidden (sum over the T rows).
#include "support.hpp"

namespace ws1::ref {

namespace {

struct Operands {
  Shape hidden_shape, logits_shape;
  std::int64_t rows, width, vocab;
};

Operands check_operands(const Call& call, bool backward) {
  const Tensor& h = call.tensor("hidden", DType::kBF16);
  const Tensor& w = call.tensor("weight", DType::kBF16, 2);
  if (backward) call.tensor("dy.logits", DType::kBF16);
  call.expect(h.dim() >= 1, "hidden", "needs a last (hidden-size) dimension");
  Operands x{h.shape(), h.shape(), 0, h.shape().back(), w.shape()[0]};
  call.expect(w.shape()[1] == x.width, "weight",
              "shape " + shape_text(w.shape()) + " should be [V, " + std::to_string(x.width) + "] for hidden " +
                  shape_text(h.shape()));
  x.logits_shape.back() = x.vocab;
  x.rows = 1;
  for (std::size_t d = 0; d + 1 < x.hidden_shape.size(); ++d) x.rows *= x.hidden_shape[d];
  if (backward) {
    const Tensor& dy = call.tensor("dy.logits", DType::kBF16);
    call.expect(dy.shape() == x.logits_shape, "dy.logits",
                "shape " + shape_text(dy.shape()) + " should be the logits' " + shape_text(x.logits_shape));
  }
  return x;
}

}  // namespace

Tensors lm_head_forward(const Call& call) {
  const Operands x = check_operands(call, false);
  const std::vector<float> h = call.floats("hidden"), w = call.floats("weight");
  std::vector<float> logits(static_cast<std::size_t>(x.rows * x.vocab));
  // weight [V, H] is the [n, k] layout of W^T.
  matmul(h.data(), w.data(), logits.data(), x.rows, x.width, x.vocab, true, call.ctx().threads);
  return {{"logits", f32_tensor(x.logits_shape, std::move(logits))}};
}

Tensors lm_head_backward(const Call& call) {
  const Operands x = check_operands(call, true);
  const unsigned threads = call.ctx().threads;
  const std::vector<float> h = call.floats("hidden"), w = call.floats("weight");
  std::vector<float> dy = call.floats("dy.logits");
  // dhidden[T, H] = dy[T, V] @ weight[V, H].
  std::vector<float> dh(static_cast<std::size_t>(x.rows * x.width));
  matmul(dy.data(), w.data(), dh.data(), x.rows, x.vocab, x.width, false, threads);
  // dweight[V, H] = dy^T[V, T] @ hidden[T, H]; dy itself is no longer needed once transposed.
  const std::vector<float> dyt = transposed(dy, x.rows, x.vocab);
  std::vector<float>().swap(dy);
  std::vector<float> dw(static_cast<std::size_t>(x.vocab * x.width));
  matmul(dyt.data(), h.data(), dw.data(), x.vocab, x.rows, x.width, false, threads);
  return {{"dhidden", f32_tensor(x.hidden_shape, std::move(dh))},
          {"dweight", f32_tensor({x.vocab, x.width}, std::move(dw))}};
}

}  // namespace ws1::ref
