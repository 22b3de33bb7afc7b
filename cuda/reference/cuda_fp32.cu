// The cuda_fp32 reference engine: the ops its family files add (reference_ops.hpp) computed on
// the device in FP32 — own FP32 kernels, GEMMs through cuBLAS FP32 with CUBLAS_PEDANTIC_MATH set
// and read back — and every other op through the CPU engine. Each result records what computed
// it (cell.reference), so an evidence file says which golds came from where.
#include <cublas_v2.h>

#include <string>

#include "reference_ops.hpp"
#include "ws1cuda/cuda_reference.hpp"
#include "ws1cuda/device_judge.hpp"
#include "ws1/op_inputs.hpp"

namespace ws1cuda {
namespace {

class CudaFp32 final : public ws1::ReferenceEngine {
 public:
  CudaFp32(cublasHandle_t h, std::string mode) : h_(h), mode_(std::move(mode)) {
    reference::add_gemm_refs(table_);
    reference::add_logprob_refs(table_);
    reference::add_attention_refs(table_);
    reference::add_pointwise_refs(table_);
  }
  ~CudaFp32() override { cublasDestroy(h_); }
  CudaFp32(const CudaFp32&) = delete;
  CudaFp32& operator=(const CudaFp32&) = delete;

  std::string name() const override { return "cuda_fp32"; }

  ws1::Result<ws1::ReferenceResult> forward(const ws1::Op& op, const ws1::Tensors& in,
                                            const ws1::OpContext& ctx) override {
    auto it = table_.find(op.name());
    if (it == table_.end()) return cpu_->forward(op, in, ctx);
    return run(op, it->second, [&] { return it->second.forward(in, ctx, h_); });
  }
  ws1::Result<ws1::ReferenceResult> backward(const ws1::Op& op, const ws1::Tensors& in,
                                             const ws1::OpContext& ctx) override {
    auto it = table_.find(op.name());
    if (it == table_.end()) return cpu_->backward(op, in, ctx);
    return run(op, it->second, [&] { return it->second.backward(in, ctx, h_); });
  }

 private:
  template <class F>
  ws1::Result<ws1::ReferenceResult> run(const ws1::Op& op, const reference::DeviceRef& ref, F body) {
    auto r = ws1::ops::guarded(op.name(), body);
    if (!r) return r.error();
    ws1::ReferenceProvenance p{ref.engine, std::nullopt};
    if (ref.uses_cublas) p.math_mode = mode_;
    return ws1::ReferenceResult{std::move(r).value(), std::move(p)};
  }

  cublasHandle_t h_;
  std::string mode_;
  reference::Table table_;
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
  install_device_judge();  // its large golds stay on the device and are judged there
  return std::unique_ptr<ws1::ReferenceEngine>(new CudaFp32(h, "CUBLAS_PEDANTIC_MATH"));
}

}  // namespace ws1cuda
