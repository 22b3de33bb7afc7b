// batch_invariant_logp's cpu_bf16 candidate (DESIGN §6, NOTES §c; the FP32 reference is
// lib/ref/batch_invariant_logp.cpp): logp with a per-row reduction whose order is
// fixed whatever the number of rows T, the row's position or the thread count.
//   inputs   logits [..., V] bf16, targets [...] int64
//   output   logp [...] float32: logits[t, y] - logsumexp(logits[t]) in FP32; a row whose
//            target is ctx.ignore_index (-100 by default) gives +0; any other target outside
//            [0, V) is an error
//   backward dy.logp [...] float32 -> dlogits [..., V] = dy * (onehot(y) - softmax(logits)),
//            bf16; ignored rows get an all +0 gradient
// The declared split (ws1/op_orders.hpp): fixed 1024-wide vocabulary chunks from index 0, each
// reduced in index order (max, then sum of exp(x - chunk max)), chunks merged left to right
// with one rescaling fused multiply-add. It is the same row kernel as logp's candidate.
#include "logsumexp.hpp"
#include "registry.hpp"

namespace ws1::ops {
namespace {

class BatchInvariantLogp final : public Op {
 public:
  BatchInvariantLogp() : Op(*find_op("batch_invariant_logp")) {}
  std::vector<TensorDecl> outputs() const override { return {{"logp", DType::kF32}}; }
  std::vector<TensorDecl> gradients() const override { return {{"dlogits", DType::kBF16}}; }
  Result<Tensors> cpu_forward(const Tensors& in, const OpContext& ctx) const override {
    return selected_logp_forward(name(), in, ctx, true);
  }
  Result<Tensors> cpu_backward(const Tensors& in, const OpContext& ctx) const override {
    return selected_logp_backward(name(), in, ctx, true);
  }
};

}  // namespace

const Op& batch_invariant_logp_op() {
  static const BatchInvariantLogp op;
  return op;
}

}  // namespace ws1::ops
