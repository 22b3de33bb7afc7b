// logp's cpu_bf16 candidate (DESIGN §6, NOTES §c; spec §2.1, §9.5): the selected
// log-softmax of logits rows; the FP32 reference is lib/ref/logp.cpp.
//   inputs   logits [..., V] bf16, targets [...] int64 (every target in [0, V), else an error)
//   output   logp [...] = logits[t, y] - logsumexp(logits[t]), computed in FP32, FLOAT32 out
//            (logprob aggregates are FP32 on every backend)
//   backward dy.logp [...] float32 -> dlogits [..., V] = dy * (onehot(y) - softmax(logits)),
//            FP32 arithmetic, bf16 out (the logits' dtype)
// Reduction order over V (ws1/op_orders.hpp): fixed 1024-wide chunks (per-chunk max and in-order
// sum of exp(x - max), merged left to right with rescaling). Each row is reduced on its own,
// so the candidate does not depend on the number of rows, their order or the thread count: it
// is the same row kernel as batch_invariant_logp's, which makes logp batch invariant too.
#include "logsumexp.hpp"
#include "registry.hpp"

namespace ws1::ops {
namespace {

class Logp final : public Op {
 public:
  Logp() : Op(*find_op("logp")) {}
  std::vector<TensorDecl> outputs() const override { return {{"logp", DType::kF32}}; }
  std::vector<TensorDecl> gradients() const override { return {{"dlogits", DType::kBF16}}; }
  Result<Tensors> cpu_forward(const Tensors& in, const OpContext& ctx) const override {
    return selected_logp_forward(name(), in, ctx, false);
  }
  Result<Tensors> cpu_backward(const Tensors& in, const OpContext& ctx) const override {
    return selected_logp_backward(name(), in, ctx, false);
  }
};

}  // namespace

const Op& logp_op() {
  static const Logp op;
  return op;
}

}  // namespace ws1::ops
