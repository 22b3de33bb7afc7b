// Internal: RMSNorm over the last dimension, shared by rms_norm (hidden width) and qk_norm
// (per head over head_dim). Inputs x [..., W] bf16 and weight [W] bf16; output y; gradients
// dx, dweight.
#pragma once

#include "ws1/op.hpp"

namespace ws1::ops {

enum class NormPath { kReference, kCandidate };

Result<Tensors> rms_norm_forward(std::string_view op, const Tensors& in, const OpContext& ctx,
                                 NormPath path);
Result<Tensors> rms_norm_backward(std::string_view op, const Tensors& in, const OpContext& ctx,
                                  NormPath path);

}  // namespace ws1::ops
