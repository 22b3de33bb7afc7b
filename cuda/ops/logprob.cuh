// What the logprob ops on cuda_bf16 share (logp, batch_invariant_logp, linear_logp; their
// definitions and the declared order are in ws1/op_orders.hpp).
//
// The row logsumexp, as declared, operation by operation:
//   chunk state  the row is cut into kChunk = 1024-wide chunks from index 0 (the last may be
//                shorter); per chunk m = max over the chunk (x > m ? x : m from -inf, so NaN is
//                skipped and the first of equal maxima is kept), then s = sum of expf(x - m) in
//                index order from 0; a chunk whose max is -inf is (-inf, 0);
//   merge        chunk states folded left to right into (M, S): the smaller max's sum is
//                rescaled by expf(smaller - larger) with one fused multiply-add (lse_merge);
//   value        lse = M + logf(S).
// Each IEEE operation is written as an intrinsic (__fadd_rn, __fsub_rn, __fmaf_rn): nvcc would
// otherwise contract neighbours into an FMA where the CPU rounds twice. expf and logf are CUDA's
// accurate functions (not __expf/__logf); they differ from glibc's by an ulp now and then,
// which is what keeps logp and batch_invariant_logp from equalling cpu_bf16 bit for bit (the
// order is the same). Nothing depends on the number of rows or a row's position.
//
// Kernels defined in logp.cu and shared through the launchers below:
//   logprob_row_kernel  one thread per row folds the row's chunk states [rows, nchunks] left to
//                       right and writes lse and logp = target_logit - lse (+0 for a row whose
//                       target is ignore_index, when the op honours it).
//
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ws1/op.hpp"
#include "ws1cuda/device_array.cuh"
#include "ws1cuda/kernel_support.cuh"

namespace ws1cuda::logprob {

inline constexpr int kChunk = 1024;  // ws1::ops::kLseChunk (static_assert in logp.cu)

// ---- the running (max, sum of exp(x - max)) ----

struct alignas(8) Lse {
  float max;
  float sum;
};

__device__ __forceinline__ Lse lse_empty() { return {-INFINITY, 0.0f}; }

// Merges `next` (the state of the next chunk to the right) into `acc`; ws1::ops::lse_merge.
// Commutative bit for bit (both branches rescale the smaller max's sum onto the larger one).
__device__ __forceinline__ void lse_merge(Lse& acc, const Lse next) {
  if (next.max == -INFINITY) return;
  if (next.max > acc.max) {
    acc.sum = __fmaf_rn(acc.sum, expf(__fsub_rn(acc.max, next.max)), next.sum);
    acc.max = next.max;
  } else {
    acc.sum = __fmaf_rn(next.sum, expf(__fsub_rn(next.max, acc.max)), acc.sum);
  }
}

__device__ __forceinline__ float lse_value(const Lse s) { return __fadd_rn(s.max, logf(s.sum)); }

__device__ __forceinline__ float bf16_bits_to_f32(unsigned short bits) {
  return __uint_as_float(static_cast<unsigned>(bits) << 16);
}
__device__ __forceinline__ unsigned short f32_to_bf16_bits(float v) { return __bfloat16_as_ushort(to_bf16(v)); }

// The targets of a call's rows and whether the op honours ignore_index.
struct RowTargets {
  const std::int64_t* ids = nullptr;
  std::int64_t ignore_index = -100;
  bool honour_ignore_index = false;
  __device__ bool ignored(std::int64_t r) const { return honour_ignore_index && ids[r] == ignore_index; }
};

// ---- host side (logp.cu) ----

// Folds states [rows, nchunks] per row: lse[r] (when lse != nullptr) and logp[r].
void launch_row_logp(const Lse* states, std::int64_t rows, std::int64_t nchunks,
                     const float* target_logit, RowTargets targets, float* logp, float* lse);

// logp and batch_invariant_logp (they differ in `honour_ignore_index` only). Throw
// OpInputError: call inside ws1::ops::guarded().
ws1::Tensors selected_logp_forward(std::string_view op, const ws1::Tensors& in,
                                   const ws1::OpContext& ctx, bool honour_ignore_index);
ws1::Tensors selected_logp_backward(std::string_view op, const ws1::Tensors& in,
                                    const ws1::OpContext& ctx, bool honour_ignore_index);

// Sets a kernel's dynamic shared memory limit (needed above 48 KiB).
template <class Kernel>
void allow_smem(Kernel* kernel, std::size_t bytes) {
  WS1_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

}  // namespace ws1cuda::logprob
