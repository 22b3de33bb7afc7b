// lm_head's cpu_bf16 candidate (DESIGN §6; NOTES §c): logits[T,V] = hidden[T,H] @
// weight[V,H]^T, untied, no bias; the FP32 reference is lib/ref/lm_head.cpp.
// Inputs hidden [..., H] bf16 (leading dims are rows, e.g. [T,H] or [1,T,H]), weight [V,H]
// bf16 (Hugging Face [out, in]); gradient seed dy.logits [..., V] bf16.
//
// Reduction order (every output element, gemm_cpu.hpp): 32-wide FP32 fma chunks folded left to
// right (gemm::fp32_chunked()), rounded once to bf16 — fixed by the reduction length alone, not
// by the number of rows, the vocabulary tiling or the thread count, so a row's logits do not
// depend on the rest of the batch.
// Backward (analytic, same definition): dhidden = dy @ weight (sum over V) and
// dweight = dy^T @ hidden (sum over the rows T), each in that order over its own reduction
// dimension. dweight sums over the rows of the call, so it depends on them by definition;
// dhidden's rows do not.

#include <string>
#include <utility>

#include "gemm_cpu.hpp"
#include "op_support.hpp"
#include "ws1/op_inputs.hpp"

namespace ws1::ops {

LmHeadInputs lm_head_inputs(std::string_view op, const Tensors& in, bool with_dy) {
  const Tensor& h = input(in, op, "hidden", DType::kBF16);
  const Tensor& w = input(in, op, "weight", DType::kBF16, 2);
  const Tensor* dy = with_dy ? &input(in, op, "dy.logits", DType::kBF16) : nullptr;
  require(h.dim() >= 1, op, "hidden", "needs at least one dimension");
  const std::int64_t width = h.shape().back();
  require(w.shape()[1] == width, op, "weight",
          "shape " + shape_string(w.shape()) + " does not fit hidden " + shape_string(h.shape()) +
              " (needs [V, " + std::to_string(width) + "])");
  Shape logits = h.shape();
  logits.back() = w.shape()[0];
  if (dy != nullptr)
    require(dy->shape() == logits, op, "dy.logits",
            "shape " + shape_string(dy->shape()) + " (expected the logits' shape " + shape_string(logits) + ")");
  const std::int64_t rows = numel(Shape(h.shape().begin(), h.shape().end() - 1));
  return {h, w, dy, rows, width, w.shape()[0], std::move(logits)};
}

namespace {

// A tensor whose last dimension is the width, as a [rows, width] matrix tensor (a copy only when
// its layout cannot be viewed as one).
Tensor as_rows(const Tensor& t, std::int64_t rows, std::int64_t width) {
  if (t.dim() == 2) return t;
  return (t.is_contiguous() ? t : t.contiguous()).view({rows, width});
}

gemm::Options options(const OpContext& ctx) { return {ctx.threads, true}; }


Result<Tensors> forward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return guarded(op, [&] {
    const LmHeadInputs x = lm_head_inputs(op, in, false);
    const Tensor h = as_rows(x.hidden, x.rows, x.width);
    Tensor logits = gemm::gemm(gemm::matrix(h), gemm::transposed(gemm::matrix(x.weight)),
                               DType::kBF16, gemm::fp32_chunked(), options(ctx));
    return Tensors{{"logits", logits.view(x.logits_shape)}};
  });
}

Result<Tensors> backward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return guarded(op, [&] {
    const LmHeadInputs x = lm_head_inputs(op, in, true);
    const Tensor h = as_rows(x.hidden, x.rows, x.width);
    const Tensor dy2 = as_rows(*x.dy, x.rows, x.vocab);
    const gemm::ConstMatrix hm = gemm::matrix(h), wm = gemm::matrix(x.weight), g = gemm::matrix(dy2);
    Tensor dh = gemm::gemm(g, wm, DType::kBF16, gemm::fp32_chunked(), options(ctx));                   // over V
    Tensor dw = gemm::gemm(gemm::transposed(g), hm, DType::kBF16, gemm::fp32_chunked(), options(ctx));  // over T
    return Tensors{{"dhidden", dh.view(x.hidden.shape())}, {"dweight", std::move(dw)}};
  });
}

class LmHead final : public Op {
 public:
  LmHead() : Op(*find_op("lm_head")) {}
  std::vector<TensorDecl> outputs() const override { return {{"logits", DType::kBF16}}; }
  OpWork work(const Tensors& in, bool backward) const override { return projection_work(in, backward); }
  std::vector<TensorDecl> gradients() const override {
    return {{"dhidden", DType::kBF16}, {"dweight", DType::kBF16}};
  }
  Result<Tensors> cpu_forward(const Tensors& in, const OpContext& ctx) const override {
    return forward(name(), in, ctx);
  }
  Result<Tensors> cpu_backward(const Tensors& in, const OpContext& ctx) const override {
    return backward(name(), in, ctx);
  }
};

}  // namespace

const Op& lm_head_op() {
  static const LmHead op;
  return op;
}

}  // namespace ws1::ops
