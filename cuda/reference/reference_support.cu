// Shared device helpers of the cuda_fp32 references (reference_support.cuh).
#include <algorithm>
#include <climits>
#include <string>

#include "reference_support.cuh"
#include "ws1/op_inputs.hpp"

namespace ws1cuda::reference {
namespace {

__global__ void widen_kernel(const bf16* in, float* out, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __bfloat162float(in[i]);
}

}  // namespace

DeviceArray<float> widened(const ws1::Tensor& t) {
  const DeviceArray<bf16> b = upload_bf16(t);
  DeviceArray<float> f(b.size());
  if (b.size() > 0) {
    widen_kernel<<<blocks_for(static_cast<std::int64_t>(b.size()), 256), 256>>>(
        b.get(), f.get(), static_cast<std::int64_t>(b.size()));
    check_launch("widen_kernel");
  }
  return f;
}

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw ws1::ops::DeviceError{
        ws1::environment_error("cuda_fp32", std::string(what) + ": " + cublasGetStatusString(s))};
}

// One FP32 product per K slice of kSlice (cuBLAS, column-major: it computes Cᵀ = op(B)ᵀ·op(A)ᵀ,
// whose operands are the stored row-major arrays read column-major), then the slices' partials
// added in a pairwise tree in slice order. cuBLAS alone sums a whole K in one chain per output
// (at lm_head's V = 151936 that is several times DESIGN §4's budget for a gold's own error:
// docs/decisions.md D26); this way the error grows with the tree's depth, as the CPU
// reference's does. Rows are independent, so they go in blocks that bound the partials' memory.
constexpr int kSlice = 32;
constexpr std::size_t kPartialFloats = std::size_t{1} << 30;  // 4 GiB of slice partials at most

// out[i] = the slices' partials p[s * n + i], s = 0..slices-1, added pairwise: a binary counter
// over the slices in order (equal-sized subtrees merged as soon as both exist), then what is
// left merged from the newest down. Fixed by `slices` alone.
__global__ void tree_sum_kernel(const float* p, int slices, std::int64_t n, float* out) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float value[32];
  int level[32];
  int sp = 0;
  for (int s = 0; s < slices; ++s) {
    float v = p[static_cast<std::int64_t>(s) * n + i];
    int lv = 0;
    while (sp > 0 && level[sp - 1] == lv) {
      v = value[--sp] + v;
      ++lv;
    }
    value[sp] = v;
    level[sp++] = lv;
  }
  float v = value[--sp];
  while (sp > 0) v = value[--sp] + v;
  out[i] = v;
}

DeviceArray<float> gemm(cublasHandle_t h, const DeviceArray<float>& a, bool ta, const DeviceArray<float>& b, bool tb,
                        int M, int N, int K) {
  DeviceArray<float> c = poisoned<float>(static_cast<std::size_t>(M) * N);
  if (M == 0 || N == 0) return c;
  const float alpha = 1.0f, beta = 0.0f;
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = ta ? M : K, ldb = tb ? K : N;
  // Element offsets of row m of op(A) and of K position k in each operand.
  const auto a_at = [&](std::int64_t m, std::int64_t k) { return ta ? k * M + m : m * K + k; };
  const auto b_at = [&](std::int64_t k) { return tb ? k : k * N; };
  const int full = K / kSlice, rest = K % kSlice, slices = full + (rest > 0 ? 1 : 0);
  if (slices <= 1) {
    check_cublas(cublasSgemm(h, opb, opa, N, M, K, &alpha, b.get(), ldb, a.get(), lda, &beta, c.get(), N), "cublasSgemm");
    return c;
  }
  const std::size_t per_row = static_cast<std::size_t>(slices) * N;
  const int rows = static_cast<int>(std::clamp<std::size_t>(kPartialFloats / per_row, 1, M));
  DeviceArray<float> part(per_row * rows);
  for (int m0 = 0; m0 < M; m0 += rows) {
    const int mb = std::min(rows, M - m0);
    const std::int64_t block = static_cast<std::int64_t>(mb) * N;  // one slice's partial
    if (full > 0)
      check_cublas(cublasSgemmStridedBatched(h, opb, opa, N, mb, kSlice, &alpha, b.get(), ldb, b_at(kSlice),
                                             a.get() + a_at(m0, 0), lda, a_at(0, kSlice) - a_at(0, 0), &beta,
                                             part.get(), N, block, full),
                   "cublasSgemmStridedBatched");
    if (rest > 0)
      check_cublas(cublasSgemm(h, opb, opa, N, mb, rest, &alpha, b.get() + b_at(std::int64_t{full} * kSlice), ldb,
                               a.get() + a_at(m0, std::int64_t{full} * kSlice), lda, &beta,
                               part.get() + full * block, N),
                   "cublasSgemm");
    tree_sum_kernel<<<blocks_for(block, 256), 256>>>(part.get(), slices, block, c.get() + static_cast<std::int64_t>(m0) * N);
    check_launch("tree_sum_kernel");
  }
  return c;
}

int extent(std::int64_t v, std::string_view op, const char* name) {
  ws1::ops::require(v <= INT_MAX, op, name, "too large for a cuBLAS extent");
  return static_cast<int>(v);
}

}  // namespace ws1cuda::reference
