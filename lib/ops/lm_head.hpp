// Internal: lm_head's input checks, shared by the cpu_bf16 candidate (lm_head.cpp) and the
// cuda_bf16 kernels (cuda/ops/lm_head.cu), so both backends refuse the same inputs with the
// same errors ("lm_head: <tensor>: problem").
#pragma once

#include <cstdint>
#include <string_view>

#include "ws1/op.hpp"

namespace ws1::ops {

struct LmHeadInputs {
  const Tensor& hidden;          // [..., H] bf16; the leading dims are the rows
  const Tensor& weight;          // [V, H] bf16
  const Tensor* dy = nullptr;    // dy.logits, the logits' shape, bf16 (backward only)
  std::int64_t rows = 0;         // T: the product of hidden's leading dims
  std::int64_t width = 0;        // H
  std::int64_t vocab = 0;        // V
  Shape logits_shape;            // hidden's shape with H replaced by V
};

// hidden and weight (bf16; weight rank 2 and [V, H] with hidden's H); with_dy: also dy.logits.
LmHeadInputs lm_head_inputs(std::string_view op, const Tensors& in, bool with_dy);

}  // namespace ws1::ops
