// Internal: the RMSNorm candidate over the last dimension, shared by rms_norm (hidden width) and
// qk_norm (per head over head_dim); the FP32 references are lib/ref's. Inputs x [..., W] bf16 and weight [W] bf16; output y; gradients
// dx, dweight. The input checks every backend shares: ws1/op_inputs.hpp.
#pragma once

#include <cstdint>

#include "ws1/op.hpp"
#include "ws1/op_inputs.hpp"
#include "ws1/op_orders.hpp"

namespace ws1::ops {

// The candidate's dweight order (kDwRowBlock) is public: ws1/op_orders.hpp.

// The cpu_bf16 candidate of rms_norm over x's last dimension (qk_norm: over each head).
Result<Tensors> rms_norm_forward(std::string_view op, const Tensors& in, const OpContext& ctx);
Result<Tensors> rms_norm_backward(std::string_view op, const Tensors& in, const OpContext& ctx);

}  // namespace ws1::ops
