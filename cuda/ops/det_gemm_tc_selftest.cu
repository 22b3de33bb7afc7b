// Self-tests of det_gemm's tensor-core variant (ws1cuda/det_gemm_tc.hpp, "Self-tests"): its
// packed bf16 arithmetic (bf16_pack.cuh) against det_gemm's per-element definition on every
// input, and the op through the kernel's per-element formulation, for bitwise comparisons.
//
// Exhaustive checks: a grid-stride loop over 2^32 indices; index i puts one input (a float bit
// pattern, or a pair of bf16 bit patterns) in the low half of a word and the input of index
// i * kSpread (odd: a bijection of 32-bit integers) in the high half, so every input is checked
// in both halves. Words go in groups of kWords, the kernel's per-thread group, through the same
// helpers the kernel calls. Per lane and input it counts
//   fast:   the hardware result taken as is (cvt / add.rn.bf16x2) differs from the definition
//           where it is not NaN, or (leaf) is not NaN for a NaN input: the cases the fix-up
//           would not catch;
//   helper: the kernel's helper (hardware, then the fix-up) differs from the definition;
//   nan:    lanes whose hardware result is NaN (the fix-up's cases; an exact expected count).
// Counts: per thread in registers, summed per warp (__reduce_add_sync), one integer atomicAdd
// per warp on a 64-bit counter: exact and independent of the schedule.
#include <cstdint>
#include <functional>

#include "bf16_pack.cuh"
#include "det_gemm_tc.hpp"
#include "op_support.hpp"
#include "ws1cuda/det_gemm_tc.hpp"
#include "ws1cuda/device_array.cuh"

namespace ws1cuda {
namespace {

constexpr int kWords = 8;                   // det_gemm_tc_kernel's words per thread (2 x 2 m16n8 tiles)
constexpr unsigned kSpread = 0x9E3779B1u;   // odd: i -> i * kSpread is a bijection mod 2^32
constexpr std::uint64_t kIndices = std::uint64_t{1} << 32;
constexpr int kThreads = 256, kBlocks = 1024;

struct Counters {
  unsigned long long lanes, nan_lanes, fast_mismatches, helper_mismatches;
};

__device__ __forceinline__ bool half_is_nan(unsigned h) { return (h & 0x7FFFu) > 0x7F80u; }

// Adds a thread's counts to the totals: one atomic per warp and counter (all lanes take part:
// the grid-stride loops below give every thread the same trip count).
__device__ void add_counts(Counters* total, unsigned lanes, unsigned nan_lanes, unsigned fast, unsigned helper) {
  lanes = __reduce_add_sync(0xFFFFFFFFu, lanes);
  nan_lanes = __reduce_add_sync(0xFFFFFFFFu, nan_lanes);
  fast = __reduce_add_sync(0xFFFFFFFFu, fast);
  helper = __reduce_add_sync(0xFFFFFFFFu, helper);
  if ((threadIdx.x & 31u) == 0u) {
    atomicAdd(&total->lanes, static_cast<unsigned long long>(lanes));
    atomicAdd(&total->nan_lanes, static_cast<unsigned long long>(nan_lanes));
    atomicAdd(&total->fast_mismatches, static_cast<unsigned long long>(fast));
    atomicAdd(&total->helper_mismatches, static_cast<unsigned long long>(helper));
  }
}

// Lane h (0: low, 1: high half) of w.
__device__ __forceinline__ unsigned half(unsigned w, int h) { return h == 0 ? w & 0xFFFFu : w >> 16; }

// Leaf rounding: index i gives floats with bits i (low) and i * kSpread (high).
__global__ void __launch_bounds__(kThreads) check_leaf_rounding_kernel(Counters* total) {
  constexpr std::uint64_t kGroups = kIndices / kWords;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  unsigned lanes = 0, nan_lanes = 0, fast = 0, helper = 0;  // per thread: < 2^32 (16 * 2^14 groups)
  static_assert(kGroups % (std::uint64_t{kThreads} * kBlocks) == 0, "every thread runs the same trip count");
  for (std::uint64_t g = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; g < kGroups; g += stride) {
    float x[2 * kWords];
#pragma unroll
    for (int q = 0; q < kWords; ++q) {
      const unsigned i = static_cast<unsigned>(g * kWords + q);
      x[2 * q] = __uint_as_float(i);
      x[2 * q + 1] = __uint_as_float(i * kSpread);
    }
    unsigned w[kWords];
    bf16_pack::round_words(x, w);
#pragma unroll
    for (int q = 0; q < kWords; ++q) {
      const unsigned def = bf16_pack::round_pack_definition(x[2 * q], x[2 * q + 1]);
      const unsigned hw = bf16_pack::cvt_pack_rn(x[2 * q], x[2 * q + 1]);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const bool in_nan = x[2 * q + h] != x[2 * q + h];
        const bool out_nan = half_is_nan(half(hw, h));
        lanes += 1;
        nan_lanes += out_nan;
        fast += in_nan ? !out_nan : half(hw, h) != half(def, h);
        helper += half(w[q], h) != half(def, h);
      }
    }
  }
  add_counts(total, lanes, nan_lanes, fast, helper);
}

// Merge: index i gives the bf16 pair (left, right) = (i >> 16, i & 0xFFFF) in the low half and
// that of i * kSpread in the high half.
__global__ void __launch_bounds__(kThreads) check_merge_kernel(Counters* total) {
  constexpr std::uint64_t kGroups = kIndices / kWords;
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  unsigned lanes = 0, nan_lanes = 0, fast = 0, helper = 0;
  for (std::uint64_t g = blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x; g < kGroups; g += stride) {
    unsigned left[kWords], v[kWords], right[kWords];
#pragma unroll
    for (int q = 0; q < kWords; ++q) {
      const unsigned i = static_cast<unsigned>(g * kWords + q), k = i * kSpread;
      left[q] = (i >> 16) | (k & 0xFFFF0000u);
      right[q] = (i & 0xFFFFu) | (k << 16);
      v[q] = right[q];
    }
    bf16_pack::merge_words(left, v);  // v = merge(left, right)
#pragma unroll
    for (int q = 0; q < kWords; ++q) {
      const unsigned def = bf16_pack::merge_definition(left[q], right[q]);
      const unsigned hw = bf16_pack::add_rn_bf16x2(left[q], right[q]);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const bool out_nan = half_is_nan(half(hw, h));
        lanes += 1;
        nan_lanes += out_nan;
        fast += !out_nan && half(hw, h) != half(def, h);
        helper += half(v[q], h) != half(def, h);
      }
    }
  }
  add_counts(total, lanes, nan_lanes, fast, helper);
}

template <class Kernel>
DetGemmTcArithmeticCheck run_check(Kernel kernel, const char* name) {
  DeviceArray<Counters> total(1);
  WS1_CUDA(cudaMemsetAsync(total.get(), 0, sizeof(Counters), cudaStreamLegacy));
  kernel<<<kBlocks, kThreads>>>(total.get());
  check_launch(name);
  Counters host{};
  WS1_CUDA(cudaMemcpy(&host, total.get(), sizeof(Counters), cudaMemcpyDeviceToHost));
  return {host.lanes, host.nan_lanes, host.fast_mismatches, host.helper_mismatches};
}

ws1::Result<DetGemmTcArithmeticCheck> guarded_check(const std::function<DetGemmTcArithmeticCheck()>& body) {
  try {
    return body();
  } catch (const ws1::ops::OpInputError& e) {
    return e.error;
  }
}

}  // namespace

ws1::Result<DetGemmTcArithmeticCheck> det_gemm_tc_check_leaf_rounding() {
  return guarded_check([] { return run_check(check_leaf_rounding_kernel, "det_gemm_tc check_leaf_rounding_kernel"); });
}

ws1::Result<DetGemmTcArithmeticCheck> det_gemm_tc_check_merge() {
  return guarded_check([] { return run_check(check_merge_kernel, "det_gemm_tc check_merge_kernel"); });
}

ws1::Result<ws1::Tensors> det_gemm_tensor_core_forward_per_element(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return det_gemm_tc_forward_with(in, ctx, TcArithmetic::kPerElement);
}

ws1::Result<ws1::Tensors> det_gemm_tensor_core_backward_per_element(const ws1::Tensors& in,
                                                                     const ws1::OpContext& ctx) {
  return det_gemm_tc_backward_with(in, ctx, TcArithmetic::kPerElement);
}

}  // namespace ws1cuda
