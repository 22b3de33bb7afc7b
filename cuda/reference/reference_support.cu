// Shared device helpers of the cuda_fp32 references (reference_support.cuh).
#include <climits>
#include <string>

#include "op_support.hpp"
#include "reference_support.cuh"

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
    throw ws1::ops::OpInputError{
        ws1::environment_error("cuda_fp32", std::string(what) + ": " + cublasGetStatusString(s))};
}

// cuBLAS is column-major: it computes Cᵀ = op(B)ᵀ·op(A)ᵀ, whose operands are the stored
// row-major arrays read column-major.
DeviceArray<float> gemm(cublasHandle_t h, const DeviceArray<float>& a, bool ta, const DeviceArray<float>& b, bool tb,
                        int M, int N, int K) {
  DeviceArray<float> c = poisoned<float>(static_cast<std::size_t>(M) * N);
  if (M == 0 || N == 0) return c;
  const float alpha = 1.0f, beta = 0.0f;
  check_cublas(cublasSgemm(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha,
                           b.get(), tb ? K : N, a.get(), ta ? M : K, &beta, c.get(), N),
               "cublasSgemm");
  return c;
}

int extent(std::int64_t v, std::string_view op, const char* name) {
  ws1::ops::require(v <= INT_MAX, op, name, "too large for a cuBLAS extent");
  return static_cast<int>(v);
}

}  // namespace ws1cuda::reference
