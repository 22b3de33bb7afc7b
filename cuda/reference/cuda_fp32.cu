// The cuda_fp32 reference engine: the GEMM-shaped ops' FP32 references on the GPU, where the
// CPU references take longest (det_gemm over K = 12288, lm_head over V = 151936). Inputs are the
// fixture's bf16 tensors widened exactly to FP32 on the device; the products are cublasSgemm with
// CUBLAS_PEDANTIC_MATH (FP32 arithmetic, TF32 off). cuBLAS sums in its own order, not the CPU
// reference's chunked one: the two agree within FP32 rounding, which test/gpu/reference_test.cpp
// checks against the contract's float32 rows. Outputs are FP32, as the gold must be.
#include <cublas_v2.h>

#include <climits>
#include <string>

#include "det_gemm.hpp"
#include "lm_head.hpp"
#include "op_support.hpp"
#include "ws1cuda/cuda_reference.hpp"
#include "ws1cuda/device_array.cuh"

namespace ws1cuda {
namespace {

constexpr const char* kEngine = "cuda_fp32 (cublasSgemm on bf16 operands widened to FP32)";

__global__ void widen_kernel(const bf16* in, float* out, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __bfloat162float(in[i]);
}

// A bf16 host tensor on the device as FP32 (row-major, contiguous).
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

// Row-major C[M,N] = op(A)·op(B), where op(A) is [M,K] (A stored [M,K], or [K,M] when ta) and
// op(B) is [K,N] (B stored [K,N], or [N,K] when tb). cuBLAS is column-major: it computes
// Cᵀ = op(B)ᵀ·op(A)ᵀ, whose operands are the stored row-major arrays read column-major.
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

class CudaFp32 final : public ws1::ReferenceEngine {
 public:
  CudaFp32(cublasHandle_t h, std::string mode) : h_(h), mode_(std::move(mode)) {}
  ~CudaFp32() override { cublasDestroy(h_); }
  CudaFp32(const CudaFp32&) = delete;
  CudaFp32& operator=(const CudaFp32&) = delete;

  std::string name() const override { return "cuda_fp32"; }

  ws1::Result<ws1::ReferenceResult> forward(const ws1::Op& op, const ws1::Tensors& in,
                                            const ws1::OpContext& ctx) override {
    if (op.name() == "det_gemm") return mine(op, [&] { return det_gemm(in, false); });
    if (op.name() == "lm_head") return mine(op, [&] { return lm_head(in, false); });
    return cpu_->forward(op, in, ctx);
  }
  ws1::Result<ws1::ReferenceResult> backward(const ws1::Op& op, const ws1::Tensors& in,
                                             const ws1::OpContext& ctx) override {
    if (op.name() == "det_gemm") return mine(op, [&] { return det_gemm(in, true); });
    if (op.name() == "lm_head") return mine(op, [&] { return lm_head(in, true); });
    return cpu_->backward(op, in, ctx);
  }

 private:
  template <class F>
  ws1::Result<ws1::ReferenceResult> mine(const ws1::Op& op, F body) {
    auto r = ws1::ops::guarded(op.name(), body);
    if (!r) return r.error();
    return ws1::ReferenceResult{std::move(r).value(), {kEngine, mode_}};
  }

  // c = a·b; backward da = dy·bᵀ (over N), db = aᵀ·dy (over M).
  ws1::Tensors det_gemm(const ws1::Tensors& in, bool backward) {
    constexpr std::string_view op = "det_gemm";
    const ws1::ops::DetGemmInputs x = ws1::ops::det_gemm_inputs(op, in, backward);
    const int M = extent(x.a.shape()[0], op, "a"), K = extent(x.a.shape()[1], op, "a");
    const int N = extent(x.b.shape()[1], op, "b");
    const DeviceArray<float> a = widened(x.a), b = widened(x.b);
    if (!backward) return {{"c", download_f32(gemm(h_, a, false, b, false, M, N, K), {M, N})}};
    const DeviceArray<float> dy = widened(*x.dy);
    return {{"da", download_f32(gemm(h_, dy, false, b, true, M, K, N), {M, K})},
            {"db", download_f32(gemm(h_, a, true, dy, false, K, N, M), {K, N})}};
  }

  // logits = hidden·weightᵀ; backward dhidden = dy·weight (over V), dweight = dyᵀ·hidden (over T).
  ws1::Tensors lm_head(const ws1::Tensors& in, bool backward) {
    constexpr std::string_view op = "lm_head";
    const ws1::ops::LmHeadInputs x = ws1::ops::lm_head_inputs(op, in, backward);
    const int T = extent(x.rows, op, "hidden"), H = extent(x.width, op, "hidden"), V = extent(x.vocab, op, "weight");
    const DeviceArray<float> hidden = widened(x.hidden), weight = widened(x.weight);
    if (!backward) return {{"logits", download_f32(gemm(h_, hidden, false, weight, true, T, V, H), x.logits_shape)}};
    const DeviceArray<float> dy = widened(*x.dy);
    return {{"dhidden", download_f32(gemm(h_, dy, false, weight, false, T, H, V), x.hidden.shape())},
            {"dweight", download_f32(gemm(h_, dy, true, hidden, false, V, H, T), {V, H})}};
  }

  cublasHandle_t h_;
  std::string mode_;
  std::unique_ptr<ws1::ReferenceEngine> cpu_ = ws1::make_cpu_reference();
};

}  // namespace

ws1::Result<std::unique_ptr<ws1::ReferenceEngine>> make_cuda_fp32_reference() {
  cublasHandle_t h = nullptr;
  if (cublasStatus_t s = cublasCreate(&h); s != CUBLAS_STATUS_SUCCESS)
    return ws1::Error{"--reference", "cuda_fp32", std::string("cublasCreate: ") + cublasGetStatusString(s),
                      ws1::ExitCode::kEnvironment};
  cublasMath_t m{};
  if (cublasSetMathMode(h, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS ||
      cublasGetMathMode(h, &m) != CUBLAS_STATUS_SUCCESS || m != CUBLAS_PEDANTIC_MATH) {
    cublasDestroy(h);
    return ws1::Error{"--reference", "cuda_fp32", "cuBLAS did not keep CUBLAS_PEDANTIC_MATH on its handle",
                      ws1::ExitCode::kEnvironment};
  }
  return std::unique_ptr<ws1::ReferenceEngine>(new CudaFp32(h, "CUBLAS_PEDANTIC_MATH"));
}

}  // namespace ws1cuda
