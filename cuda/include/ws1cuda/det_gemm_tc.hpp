// det_gemm's tensor-core variant on cuda_bf16 (cuda/ops/det_gemm_tc.cu), next to the default
// det_gemm op (the naive CUDA-core kernels, bit-equal to cpu_bf16), which it does not replace.
// Plain C++ header.
//
// Same inputs, checks, outputs and declared tree (spec §9.2 Option B) as det_gemm; each leaf's
// FP32 sum comes from the tensor cores (mma.sync bf16 -> f32, k in 16-wide steps summed in the
// MMA's own order), so the results are within the contract's tolerance of the CPU candidate,
// not bit-equal to it. Rows never interact (batch-invariant), and the tree is the declared one,
// so a K split at the root merged as bf16(left + right) gives the full-K bits (TP2-invariant).
#pragma once

#include <cstdint>

#include "ws1/error.hpp"
#include "ws1/op.hpp"

namespace ws1cuda {

// Whether the tensor cores take a reduction of length R with leaves of at most `leaf`: the
// declared tree over R must be regular (2^d leaves of one width w, w % 8 == 0, w <= 32, d <= 10;
// e.g. R = 4096: 128 leaves of 32; R = 12288: 512 of 24). Depends on R and leaf only.
bool det_gemm_tc_applies(std::int64_t R, std::int64_t leaf);

// det_gemm forward (inputs a, b; output c) with c on the tensor cores when
// det_gemm_tc_applies(K, k_tree_leaf), else det_gemm's own (naive) forward. Launch region
// "det_gemm_tc.fwd" (`ws1check bench`).
ws1::Result<ws1::Tensors> det_gemm_tensor_core_forward(const ws1::Tensors& in, const ws1::OpContext& ctx);

// det_gemm backward (inputs a, b, dy.c; outputs da, db): da = dy · bᵀ on the tensor cores when
// det_gemm_tc_applies(N, k_tree_leaf), db = aᵀ · dy on the naive kernel (a reduction over the M
// rows, of any length); when da does not apply, det_gemm's own backward. Region "det_gemm_tc.bwd".
ws1::Result<ws1::Tensors> det_gemm_tensor_core_backward(const ws1::Tensors& in, const ws1::OpContext& ctx);

}  // namespace ws1cuda
