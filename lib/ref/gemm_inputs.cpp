#include "gemm_inputs.hpp"

#include <string>

namespace ws1::ref {

DetGemmInputs read_det_gemm_inputs(const Call& call, bool backward) {
  const Tensor& a = call.tensor("a", DType::kBF16, 2);
  const Tensor& b = call.tensor("b", DType::kBF16, 2);
  call.expect(b.shape()[0] == a.shape()[1], "b",
              "shape " + shape_text(b.shape()) + " cannot multiply a " + shape_text(a.shape()) +
                  ": its rows must equal a's " + std::to_string(a.shape()[1]) + " columns");
  DetGemmInputs x{a.shape()[0], a.shape()[1], b.shape()[1], call.floats("a", DType::kBF16, 2),
                  call.floats("b", DType::kBF16, 2), {}};
  if (backward) {
    const Tensor& dy = call.tensor("dy.c", DType::kBF16, 2);
    call.expect(dy.shape() == Shape{x.m, x.n}, "dy.c",
                "shape " + shape_text(dy.shape()) + " should be c's " + shape_text({x.m, x.n}));
    x.dy = call.floats("dy.c", DType::kBF16, 2);
  }
  return x;
}

LinearShape linear_shape(const Call& call, const Tensor& hidden, const Tensor& weight) {
  call.expect(hidden.dim() >= 1, "hidden", "needs a last (hidden-size) dimension");
  LinearShape x{hidden.shape(), 1, hidden.shape().back(), weight.shape()[0]};
  call.expect(weight.shape()[1] == x.width, "weight",
              "shape " + shape_text(weight.shape()) + " should be [V, " + std::to_string(x.width) +
                  "] for hidden " + shape_text(hidden.shape()));
  for (std::size_t d = 0; d + 1 < x.hidden_shape.size(); ++d) x.rows *= x.hidden_shape[d];
  return x;
}

LmHeadInputs read_lm_head_inputs(const Call& call, bool backward) {
  const Tensor& h = call.tensor("hidden", DType::kBF16);
  const Tensor& w = call.tensor("weight", DType::kBF16, 2);
  if (backward) call.tensor("dy.logits", DType::kBF16);
  const LinearShape shape = linear_shape(call, h, w);
  LmHeadInputs x{shape, shape.hidden_shape, {}, {}, {}};
  x.logits_shape.back() = x.vocab;
  if (backward) {
    const Tensor& dy = call.tensor("dy.logits", DType::kBF16);
    call.expect(dy.shape() == x.logits_shape, "dy.logits",
                "shape " + shape_text(dy.shape()) + " should be the logits' " + shape_text(x.logits_shape));
    x.dy = call.floats("dy.logits");
  }
  x.hidden = call.floats("hidden");
  x.weight = call.floats("weight");
  return x;
}

}  // namespace ws1::ref
