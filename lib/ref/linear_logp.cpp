// linear_logp's FP32 reference: logp of the logits hidden @ weight^T, materialised in full.
//   hidden [..., H] bf16, weight [V, H] bf16, targets [...] int64 (each in [0, V))
//   z = hidden @ weight^T [T, V] in FP32 (T = the product of hidden's leading dimensions)
//   logp [...] = z[t, y] - logsumexp(z[t]), max-subtracted, FP32 (log_softmax.hpp)
//   backward: dy.logp [...] float32; G = dy * (onehot(y) - softmax(z)) [T, V];
//   dhidden [..., H] = G @ weight (sum over V), dweight [V, H] = G^T @ hidden (sum over T)
// The candidate never holds [T, V]; the reference does (T * V floats) because that is the
// definition, and it is only ever compared, not deployed.
#include "log_softmax.hpp"

namespace ws1::ref {

namespace {

struct Problem {
  Shape lead;  // hidden's shape without H (= targets' shape)
  std::int64_t rows = 0, width = 0, vocab = 0;
  std::vector<std::int64_t> targets;
  std::vector<float> hidden, weight;  // [T, H], [V, H]
};

Problem read_problem(const Call& call, bool backward) {
  const Tensor& h = call.tensor("hidden", DType::kBF16);
  const Tensor& w = call.tensor("weight", DType::kBF16, 2);
  const Tensor& t = call.tensor("targets", DType::kI64);
  if (backward) call.tensor("dy.logp", DType::kF32);
  call.expect(h.dim() >= 1, "hidden", "needs a last (hidden-size) dimension");
  Problem p;
  p.width = h.shape().back();
  call.expect(w.shape()[1] == p.width, "weight",
              "shape " + shape_text(w.shape()) + " should be [V, " + std::to_string(p.width) + "] for hidden " +
                  shape_text(h.shape()));
  p.vocab = w.shape()[0];
  call.expect(p.vocab >= 1, "weight", "has an empty vocabulary dimension: " + shape_text(w.shape()));
  p.lead.assign(h.shape().begin(), h.shape().end() - 1);
  call.expect(t.shape() == p.lead, "targets",
              "shape " + shape_text(t.shape()) + " should be hidden's " + shape_text(h.shape()) +
                  " without the hidden-size dimension");
  p.targets = call.integers("targets");
  p.rows = static_cast<std::int64_t>(p.targets.size());
  for (std::size_t i = 0; i < p.targets.size(); ++i)
    call.expect(p.targets[i] >= 0 && p.targets[i] < p.vocab, "targets",
                "element " + std::to_string(i) + " is " + std::to_string(p.targets[i]) + ", not a class in [0, " +
                    std::to_string(p.vocab) + ")");
  if (backward) {
    const Tensor& dy = call.tensor("dy.logp", DType::kF32);
    call.expect(dy.shape() == p.lead, "dy.logp",
                "shape " + shape_text(dy.shape()) + " should be the targets' " + shape_text(p.lead));
  }
  p.hidden = call.floats("hidden");
  p.weight = call.floats("weight");
  return p;
}

// z [T, V] = hidden @ weight^T in FP32 (weight [V, H] is the [n, k] layout).
std::vector<float> logits(const Problem& p, unsigned threads) {
  std::vector<float> z(static_cast<std::size_t>(p.rows * p.vocab));
  matmul(p.hidden.data(), p.weight.data(), z.data(), p.rows, p.width, p.vocab, true, threads);
  return z;
}

}  // namespace

Tensors linear_logp_forward(const Call& call) {
  const Problem p = read_problem(call, false);
  const unsigned threads = call.ctx().threads;
  std::vector<float> z = logits(p, threads);
  std::vector<float> logp = selected_logp_rows(z, p.rows, p.vocab, p.targets, {}, threads);
  return {{"logp", f32_tensor(p.lead, std::move(logp))}};
}

Tensors linear_logp_backward(const Call& call) {
  const Problem p = read_problem(call, true);
  const unsigned threads = call.ctx().threads;
  const std::vector<float> dy = call.floats("dy.logp", DType::kF32);
  std::vector<float> g = logits(p, threads);
  selected_logp_gradient_rows(g, p.rows, p.vocab, p.targets, {}, dy, threads);
  // dhidden[T, H] = G[T, V] @ weight[V, H].
  std::vector<float> dh(static_cast<std::size_t>(p.rows * p.width));
  matmul(g.data(), p.weight.data(), dh.data(), p.rows, p.vocab, p.width, false, threads);
  // dweight[V, H] = G^T[V, T] @ hidden[T, H]; G itself is dropped once transposed.
  const std::vector<float> gt = transposed(g, p.rows, p.vocab);
  std::vector<float>().swap(g);
  std::vector<float> dw(static_cast<std::size_t>(p.vocab * p.width));
  matmul(gt.data(), p.hidden.data(), dw.data(), p.vocab, p.rows, p.width, false, threads);
  Shape dh_shape = p.lead;
  dh_shape.push_back(p.width);
  return {{"dhidden", f32_tensor(dh_shape, std::move(dh))}, {"dweight", f32_tensor({p.vocab, p.width}, std::move(dw))}};
}

}  // namespace ws1::ref
