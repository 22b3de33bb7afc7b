// Internal: the pieces of det_gemm's declared tree (spec §9.2 Option B) that both cuda_bf16
// variants use: the naive CUDA-core kernels (det_gemm.cu, bit-equal to cpu_bf16) and the
// tensor-core variant (det_gemm_tc.cu). Included by .cu files only.
//
//   the reduction range [lo,hi) is a leaf when hi - lo <= leaf, else it splits at
//   mid = lo + (hi - lo) / 2; a leaf is an FP32 sum rounded to bf16; a merge is
//   bf16(float(left) + float(right)); evaluated in post-order.
#pragma once

#include <climits>
#include <cstdint>
#include <vector>

#include "det_gemm.hpp"
#include "op_support.hpp"
#include "ws1cuda/device_array.cuh"

namespace ws1cuda {

// A leaf ending at k = hi (it starts where the previous one ended), then `merges` merges: the
// tree in post-order, as the CPU candidate plans it.
struct TreeStep {
  int hi;
  int merges;
};

// Appends the steps of the tree over [lo, hi) (hi - lo >= 1) to `out`.
inline void tree_steps(std::int64_t lo, std::int64_t hi, std::int64_t leaf, std::vector<TreeStep>& out) {
  if (hi - lo <= leaf) {
    out.push_back({static_cast<int>(hi), 0});
    return;
  }
  const std::int64_t mid = lo + (hi - lo) / 2;
  tree_steps(lo, mid, leaf, out);
  tree_steps(mid, hi, leaf, out);
  out.back().merges += 1;  // this node completes right after its right subtree
}

// Round to nearest even bf16 exactly as ws1::round_bf16 (a NaN keeps its sign and top payload
// with the quiet bit set), returned as float32 (low 16 bits zero).
__device__ __forceinline__ float round_bf16(float x) {
  const unsigned b = __float_as_uint(x);
  if (x != x) return __uint_as_float((b | 0x00400000u) & 0xFFFF0000u);
  return __uint_as_float((b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u);
}

// The naive kernels' plan on the device: the tree's steps followed by a sentinel leaf that never
// ends (hi = INT_MAX). Built by a synchronous upload: make it outside launch regions.
struct TreePlan {
  DeviceArray<TreeStep> steps;
};
// Fails (OpInputError naming k_tree_leaf) when the tree needs more pending values than the naive
// kernel holds. Defined in det_gemm.cu.
TreePlan make_tree_plan(std::int64_t R, std::int64_t leaf);

// db[K,N] = aᵀ · dy over the M rows with the tree `over_m` (make_tree_plan(M, leaf)) on the
// CUDA cores: the naive kernel det_gemm's default backward launches for db (det_gemm.cu).
// a is [M][K], dy [M][N], both row-major on the device; nothing is launched for an empty db.
void det_gemm_naive_db(const DeviceArray<bf16>& a, const DeviceArray<bf16>& dy, DeviceArray<bf16>& db, int M, int K,
                       int N, const TreePlan& over_m);

// M, K, N of checked inputs as the kernels' int extents; refuses (OpInputError naming a or b)
// shapes that do not fit.
struct DetGemmExtents {
  int M, K, N;
};
inline DetGemmExtents det_gemm_extents(const ws1::ops::DetGemmInputs& x) {
  const auto& as = x.a.shape();
  const auto& bs = x.b.shape();
  ws1::ops::require(as[0] <= INT_MAX && as[1] <= INT_MAX, "det_gemm", "a",
                    "shape " + ws1::shape_string(as) + " exceeds the kernels' 32-bit extents");
  ws1::ops::require(bs[1] <= INT_MAX, "det_gemm", "b",
                    "shape " + ws1::shape_string(bs) + " exceeds the kernels' 32-bit extents");
  return {static_cast<int>(as[0]), static_cast<int>(as[1]), static_cast<int>(bs[1])};
}

}  // namespace ws1cuda
