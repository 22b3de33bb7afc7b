// RMSNorm's input reading (norm_inputs.hpp).
#include "norm_inputs.hpp"

#include <cstdint>
#include <string>

namespace ws1::ref::norm {

Rows read(const Call& call, bool backward) {
  Rows n;
  const Tensor& x = call.tensor("x", DType::kBF16);
  const Tensor& w = call.tensor("weight", DType::kBF16, 1);
  call.expect(x.dim() >= 1, "x", "is a scalar; the norm runs over a last dimension");
  n.x_shape = x.shape();
  n.w_shape = w.shape();
  n.width = n.x_shape.back();
  call.expect(n.w_shape[0] == n.width, "weight",
              "shape " + shape_text(n.w_shape) + " but x " + shape_text(n.x_shape) + " has rows of " +
                  std::to_string(n.width));
  if (backward) {
    const Tensor& dy = call.tensor("dy.y", DType::kBF16);
    call.expect(dy.shape() == n.x_shape, "dy.y",
                "shape " + shape_text(dy.shape()) + " is not x's " + shape_text(n.x_shape));
  }
  n.rows = n.width == 0 ? 0 : x.numel() / n.width;
  n.x = call.floats("x");
  n.w = call.floats("weight");
  if (backward) n.dy = call.floats("dy.y");
  return n;
}

void check_head_dim(const Call& call) {
  const Tensor& x = call.tensor("x", DType::kBF16);
  call.expect(x.dim() >= 1, "x", "is a scalar; the norm runs over head_dim");
  const std::int64_t head_dim = call.ctx().head_dim;
  call.expect(head_dim <= 0 || x.shape().back() == head_dim, "x",
              "shape " + shape_text(x.shape()) + " does not end in head_dim " + std::to_string(head_dim));
}

}  // namespace ws1::ref::norm
