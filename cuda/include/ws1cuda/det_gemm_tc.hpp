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

// ---- Self-tests (for test/gpu) ----------------------------------------------------------------
// The kernel rounds leaves and merges two bf16 per instruction (cvt.rn.bf16x2.f32,
// add.rn.bf16x2) and re-runs det_gemm's per-element definition (round_bf16 with its NaN rule,
// bf16(float(left) + float(right))) where the hardware gave a NaN; the two must agree bit for
// bit on every input.

// Exhaustive comparison counts, over both bf16 halves of a packed word.
struct DetGemmTcArithmeticCheck {
  std::uint64_t lanes = 0;              // lanes compared: every input once in each half (2 * 2^32)
  std::uint64_t nan_lanes = 0;          // lanes whose hardware result is NaN (the fix-up's cases)
  std::uint64_t fast_mismatches = 0;    // lanes the hardware gets wrong where the fix-up is not taken
  std::uint64_t helper_mismatches = 0;  // lanes where the kernel's helper differs from the definition
};
// Leaf rounding on all 2^32 float bit patterns (finite, inf, NaN, subnormal, both zeros).
ws1::Result<DetGemmTcArithmeticCheck> det_gemm_tc_check_leaf_rounding();
// Merge on all 2^16 x 2^16 (left, right) bf16 bit-pattern pairs.
ws1::Result<DetGemmTcArithmeticCheck> det_gemm_tc_check_merge();

// det_gemm_tensor_core_forward / _backward with the kernel evaluating the definition per
// element (its formulation before the packed arithmetic): the same bits by design, for
// comparing outputs bitwise. Launch regions "det_gemm_tc.fwd.per_element" / ".bwd.per_element".
ws1::Result<ws1::Tensors> det_gemm_tensor_core_forward_per_element(const ws1::Tensors& in, const ws1::OpContext& ctx);
ws1::Result<ws1::Tensors> det_gemm_tensor_core_backward_per_element(const ws1::Tensors& in,
                                                                     const ws1::OpContext& ctx);

}  // namespace ws1cuda
