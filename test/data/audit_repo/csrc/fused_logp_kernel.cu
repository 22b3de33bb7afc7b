#include <torch/extension.h>

torch::Tensor fused_logp_forward(torch::Tensor logits, torch::Tensor target) {
  auto output = torch::empty({logits.size(0)}, logits.options());
  // auto output = torch::empty({n}, logits.options());
  return output;
}

torch::Tensor fused_logp_forward_fp32(torch::Tensor logits, torch::Tensor target) {
  auto output = torch::empty({logits.size(0)}, logits.options().dtype(at::ScalarType::Float));
  return output;
}

torch::Tensor fused_logp_backward(torch::Tensor logits, torch::Tensor grad) {
  auto grad_logits = torch::empty_like(logits);
  return grad_logits;
}

at::Tensor lse_forward(at::Tensor logits, int64_t n) {
  at::Tensor lse = at::empty({n}, at::TensorOptions().device(logits.device()).dtype(logits.scalar_type()));
  return lse;
}
