// Internal: RMSNorm over the last dimension, shared by rms_norm (hidden width) and qk_norm
// (per head over head_dim). Inputs x [..., W] bf16 and weight [W] bf16; output y; gradients
// dx, dweight. The input checks are shared with the cuda_bf16 kernels (cuda/ops/rms_norm.cuh).
#pragma once

#include "ws1/op.hpp"

namespace ws1::ops {

enum class NormPath { kReference, kCandidate };

Result<Tensors> rms_norm_forward(std::string_view op, const Tensors& in, const OpContext& ctx,
                                 NormPath path);
Result<Tensors> rms_norm_backward(std::string_view op, const Tensors& in, const OpContext& ctx,
                                  NormPath path);

// A checked RMSNorm call: its tensors and x viewed as [rows, width].
struct NormInputs {
  const Tensor* x = nullptr;
  const Tensor* weight = nullptr;
  const Tensor* dy = nullptr;  // "dy.y"; backward only
  std::int64_t rows = 0, width = 0;
};
// Checks the inputs of a forward (or, with `backward`, a backward) call: bf16 x with at least
// one dimension, bf16 weight [width of x's last dimension], bf16 dy.y shaped like x. Throws
// OpInputError naming `op` and the tensor (call inside guarded()).
NormInputs check_norm_inputs(std::string_view op, const Tensors& in, bool backward);
// qk_norm's check before check_norm_inputs: when the run knows head_dim (ctx.head_dim > 0),
// x's last dimension must equal it. Defined in qk_norm.cpp.
void check_qk_norm_head_dim(std::string_view op, const Tensors& in, const OpContext& ctx);

}  // namespace ws1::ops
