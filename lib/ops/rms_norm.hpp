// Internal: the RMSNorm candidate over the last dimension, shared by rms_norm (hidden width) and
// qk_norm (per head over head_dim); the FP32 references are lib/ref's. Inputs x [..., W] bf16 and weight [W] bf16; output y; gradients
// dx, dweight. The input checks are shared with the cuda_bf16 kernels (cuda/ops/rms_norm.cuh).
#pragma once

#include <cstdint>

#include "ws1/op.hpp"

namespace ws1::ops {

// The candidate's dweight (cpu_bf16 and cuda_bf16 alike; docs/decisions.md D24): rows are cut
// into fixed blocks of kDwRowBlock rows from row 0 (the last one may be shorter). Per column,
// each block's partial is acc = fma(float(dy*x), rstd, acc) over its rows left to right from
// +0; the partials are then added in block order, s = 0, s = s + p_0, s = s + p_1, ... in FP32,
// and s is rounded to bf16 once. The block size depends on nothing but this constant, so the
// result is a function of the rows alone. 256: at qk_norm's 262144 rows (8192 tokens x 32
// heads, 128 columns) that is 1024 blocks, so the GPU sums 128 x 1024 chains of 256 instead of
// 128 chains of 262144 (rms_norm at 8192 tokens: 4096 x 32); the partials take 1/128 of the
// bytes of x, and the merge is 1024 adds per column.
inline constexpr std::int64_t kDwRowBlock = 256;

// The cpu_bf16 candidate of rms_norm over x's last dimension (qk_norm: over each head).
Result<Tensors> rms_norm_forward(std::string_view op, const Tensors& in, const OpContext& ctx);
Result<Tensors> rms_norm_backward(std::string_view op, const Tensors& in, const OpContext& ctx);

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
