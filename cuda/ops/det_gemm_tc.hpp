// Internal: det_gemm's tensor-core variant (det_gemm_tc.cu) for the .cu files: when it applies
// and its launches over device memory. The host entry points (tensors in, tensors out) are in
// ws1cuda/det_gemm_tc.hpp. Included by .cu files only.
#pragma once

#include <cstdint>
#include <optional>

#include "ws1/error.hpp"
#include "ws1/op.hpp"
#include "ws1cuda/device_array.cuh"

namespace ws1cuda {

// The deepest tree the kernel evaluates: 2^10 leaves (a reduction of up to 32768).
inline constexpr int kDetGemmTcMaxDepth = 10;

// A "regular" declared tree over a reduction of length R = width * 2^depth: every leaf has the
// same width, and the mid splits form a perfect binary tree over the leaves.
struct RegularTree {
  int width = 0;  // leaf length: a multiple of 8 (16-byte aligned leaves), at most 32
  int depth = 0;  // 2^depth leaves, depth <= kDetGemmTcMaxDepth
  std::int64_t length() const { return static_cast<std::int64_t>(width) << depth; }
};

// The regular tree of the declared tree over R with leaves of at most `leaf`, or nullopt when
// that tree is not regular (then the naive kernels run). Depends on R and leaf only: never on
// the row count, so decode (M = 1) and prefill take the same kernel.
std::optional<RegularTree> det_gemm_regular_tree(std::int64_t R, std::int64_t leaf);

// How the kernel evaluates the leaf roundings and merges; both give the same bits for every
// input. kPacked: two bf16 per instruction (bf16_pack.cuh), what the op runs. kPerElement:
// round_bf16 and __fadd_rn on each value, the definition; for the self-test entries only
// (det_gemm_tc_selftest.cu).
enum class TcArithmetic { kPacked, kPerElement };

// c[M,N] = a · b over the tree t (a [M][R], b [R][N], c [M][N], row-major, R = t.length()):
// the forward. Nothing is launched for an empty c. Launches only (no copies, no sync).
void det_gemm_tc_nn(const bf16* a, const bf16* b, bf16* c, int M, int N, const RegularTree& t,
                    TcArithmetic arithmetic = TcArithmetic::kPacked);
// c[M,N] = a · bᵀ over the tree t (a [M][R], b [N][R], c [M][N], row-major): the backward's
// da = dy · bᵀ with a = dy and b = det_gemm's b ([K][N], so here N = K and R = det_gemm's N).
void det_gemm_tc_nt(const bf16* a, const bf16* b, bf16* c, int M, int N, const RegularTree& t,
                    TcArithmetic arithmetic = TcArithmetic::kPacked);

// det_gemm_tensor_core_forward / _backward (ws1cuda/det_gemm_tc.hpp) with the kernel's
// arithmetic chosen; the public entries pass kPacked.
ws1::Result<ws1::Tensors> det_gemm_tc_forward_with(const ws1::Tensors& in, const ws1::OpContext& ctx,
                                                   TcArithmetic arithmetic);
ws1::Result<ws1::Tensors> det_gemm_tc_backward_with(const ws1::Tensors& in, const ws1::OpContext& ctx,
                                                    TcArithmetic arithmetic);

}  // namespace ws1cuda
