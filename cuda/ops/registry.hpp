// Internal: one accessor per op's cuda_bf16 implementation (each defined in cuda/ops/<op>.cu).
#pragma once

#include "ws1cuda/cuda_op.hpp"

namespace ws1cuda {

// ---- one line per implemented op (keep catalogue order) ----
const CudaOp& embedding_cuda();
const CudaOp& rms_norm_cuda();
const CudaOp& qk_norm_cuda();
const CudaOp& det_gemm_cuda();
const CudaOp& rope_cuda();
const CudaOp& attention_cuda();
const CudaOp& silu_cuda();
const CudaOp& swiglu_cuda();
const CudaOp& lm_head_cuda();
const CudaOp& logp_cuda();
const CudaOp& batch_invariant_logp_cuda();
const CudaOp& pack_cuda();
const CudaOp& linear_logp_cuda();
// ---- end of op list ----

}  // namespace ws1cuda
