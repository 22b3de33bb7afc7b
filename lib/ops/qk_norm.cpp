// qk_norm's cpu_bf16 candidate (DESIGN §6, NOTES §c; the FP32 reference is
// lib/ref/qk_norm.cpp): RMSNorm over head_dim for every head of every token,
// y = x * rsqrt(mean(x^2) + eps) * w with x [..., head_dim] (fixture [T, Hq, D], all heads,
// not one) and weight [head_dim]. Qwen3 applies it to q and k after the projections, before
// RoPE.
//
// The arithmetic is rms_norm's (rms_norm.hpp): statistic in fixed 32-wide chunks, rounded once
// ("kernel" order) or the contract's "hf" order; backward dx per row, dweight summed over all
// rows (tokens x heads) in blocks of kDwRowBlock rows whose partials are added in block order
// (ws1/op_orders.hpp, docs/decisions.md D24). Each head's row is normalised on its
// own, so a row's result does not depend on how many tokens or heads are in the call.
//
// What qk_norm adds: when the run knows head_dim (OpContext::head_dim > 0), x's last
// dimension must equal it, so a flattened [T, Hq*D] input cannot be normalised over the
// whole hidden width by mistake (check_qk_norm_head_dim, shared with cuda_bf16).
#include <fmt/format.h>

#include "op_support.hpp"
#include "rms_norm.hpp"

namespace ws1::ops {

void check_qk_norm_head_dim(std::string_view op, const Tensors& in, const OpContext& ctx) {
  const Tensor& x = input(in, op, "x", DType::kBF16);
  require(x.dim() >= 1, op, "x", "needs at least one dimension (head_dim)");
  require(ctx.head_dim <= 0 || x.shape().back() == ctx.head_dim, op, "x",
          fmt::format("shape {}: last dimension is not head_dim {}", shape_string(x.shape()),
                      ctx.head_dim));
}

namespace {

using NormFn = Result<Tensors> (*)(std::string_view, const Tensors&, const OpContext&);

Result<Tensors> per_head(NormFn fn, std::string_view op, const Tensors& in, const OpContext& ctx) {
  auto checked = guarded(op, [&] {
    check_qk_norm_head_dim(op, in, ctx);
    return Tensors{};
  });
  if (!checked) return checked;
  return fn(op, in, ctx);
}

class QkNorm final : public Op {
 public:
  QkNorm() : Op(*find_op("qk_norm")) {}
  std::vector<TensorDecl> outputs() const override { return {{"y", DType::kBF16}}; }
  std::vector<TensorDecl> gradients() const override {
    return {{"dx", DType::kBF16}, {"dweight", DType::kBF16}};
  }
  Result<Tensors> cpu_forward(const Tensors& in, const OpContext& ctx) const override {
    return per_head(rms_norm_forward, name(), in, ctx);
  }
  Result<Tensors> cpu_backward(const Tensors& in, const OpContext& ctx) const override {
    return per_head(rms_norm_backward, name(), in, ctx);
  }
};

}  // namespace

const Op& qk_norm_op() {
  static const QkNorm op;
  return op;
}

}  // namespace ws1::ops
