// Internal: the blocked, threaded FP32 GEMM the GEMM-shaped ops share (det_gemm, lm_head,
// linear_logp): C[M,N] = A[M,K] @ B[K,N], with the reduction order over k spelled out so that
// every bit of the result is defined by the inputs and the Reduction alone.
//
// Per output element c[m,n], with p_k = a[m,k] * b[k,n]:
//   - K is cut into leaves (consecutive k ranges, see Reduction); a leaf's sum starts at 0.0f
//     and adds p_k in increasing k with fused multiply-adds: s = fma(a, b, s) (exact product,
//     one rounding per step, as a GPU kernel's FFMA accumulation);
//   - leaves are combined in the Reduction's shape: a left fold (t = 0.0f; t = t + leaf, in
//     leaf order) or the mid-split tree (node = left + right);
//   - leaves and merges are optionally rounded to bf16 (round to nearest even); the result is
//     stored as float32 or rounded once more to bf16 (a no-op when already rounded).
// Nothing else enters: blocking, packing, the vector width, the thread count and the number of
// rows or columns in the call do not change any bit. The AVX2 kernel and the portable kernel
// perform the same IEEE operations per element and agree bit for bit (tested).
//
// Operands are strided views (float32 or bf16, widened exactly while packing), so transposes
// and slices cost nothing. Shape mismatches are programming errors: std::logic_error (an op's
// guarded() turns it into that op's Error).
#pragma once

#include <cstdint>

#include "ws1/dtype.hpp"
#include "ws1/tensor.hpp"

namespace ws1::ops::gemm {

// Read-only matrix view: element (r, c) at data[r * row_stride + c * col_stride] (elements).
struct ConstMatrix {
  const void* data = nullptr;
  DType dtype = DType::kF32;  // kF32 or kBF16
  std::int64_t rows = 0, cols = 0;
  std::int64_t row_stride = 0, col_stride = 1;
};

// Output view: row-major rows x cols, element (r, c) at data[r * row_stride + c].
struct Matrix {
  void* data = nullptr;
  DType dtype = DType::kF32;  // kF32 or kBF16 (rounded to nearest even)
  std::int64_t rows = 0, cols = 0;
  std::int64_t row_stride = 0;
};

// A 2-D tensor (F32 or BF16, any strides) as a matrix; the tensor must outlive the view.
ConstMatrix matrix(const Tensor& t);
// A row-major float buffer as a matrix.
ConstMatrix matrix(const float* data, std::int64_t rows, std::int64_t cols);
// The transpose (a view: strides swapped).
ConstMatrix transposed(const ConstMatrix& m);
// Rows [r0, r0 + rows) and columns [c0, c0 + cols) of m (a view).
ConstMatrix block(const ConstMatrix& m, std::int64_t r0, std::int64_t rows, std::int64_t c0,
                  std::int64_t cols);
// A whole row-major tensor (F32 or BF16, rank 2, contiguous) as an output.
Matrix output(Tensor& t);

// How each output's sum over k is formed (see the file comment).
struct Reduction {
  enum class Kind {
    kFold,           // leaves of `leaf` elements (the last may be shorter), left-folded from 0.0f
    kMidSplitTree,   // range [lo,hi) is a leaf when hi - lo <= leaf, else split at
                     // mid = lo + (hi - lo) / 2 into [lo,mid) and [mid,hi)
  };
  Kind kind = Kind::kFold;
  std::int64_t leaf = 32;     // >= 1
  bool round_leaves = false;  // each leaf sum rounded to bf16
  bool round_merges = false;  // each fold step / tree merge rounded to bf16
};

// The FP32 order of the FP32-accumulating CPU candidates: 32-wide fma
// chunks folded left to right in FP32 (the chunking of rms_norm's statistic).
inline constexpr std::int64_t kFp32Chunk = 32;
inline Reduction fp32_chunked(std::int64_t chunk = kFp32Chunk) {
  return {Reduction::Kind::kFold, chunk, false, false};
}
// det_gemm, spec §9.2 Option B: FP32 leaves rounded to bf16, bf16 merges.
inline Reduction bf16_tree(std::int64_t leaf) {
  return {Reduction::Kind::kMidSplitTree, leaf, true, true};
}
// det_gemm, spec §9.2 Option A: the same tree kept in FP32, one rounding at the output.
inline Reduction fp32_tree(std::int64_t leaf) {
  return {Reduction::Kind::kMidSplitTree, leaf, false, false};
}

struct Options {
  unsigned threads = 0;     // 0: hardware concurrency (results do not depend on it)
  bool allow_simd = true;   // false: the portable kernel (tests compare the two)
};

// c = a @ b: a [M,K], b [K,N], c [M,N]; c must not overlap a or b. K = 0 gives zeros.
void gemm(const ConstMatrix& a, const ConstMatrix& b, const Matrix& c, const Reduction& r,
          const Options& opt = {});

// The same into a new contiguous [M,N] tensor of `out` (kF32 or kBF16).
Tensor gemm(const ConstMatrix& a, const ConstMatrix& b, DType out, const Reduction& r,
            const Options& opt = {});

// Whether gemm() uses the AVX2+FMA kernel on this machine when allow_simd is set.
bool simd_kernel_available();

}  // namespace ws1::ops::gemm
