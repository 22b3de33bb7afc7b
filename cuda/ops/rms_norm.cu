// rms_norm on cuda_bf16: y = x * rsqrt(mean(x^2) + eps) * w over the last dimension (hidden
// width), and its backward (dx, dweight). The kernels, their work split and their reduction
// orders (the cpu_bf16 candidate's, bit for bit) are in rms_norm.cuh, shared with qk_norm.
#include "registry.hpp"
#include "rms_norm.cuh"

namespace ws1cuda {
namespace {

constexpr std::string_view kOp = "rms_norm";

ws1::Result<ws1::Tensors> forward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return ws1::ops::guarded(kOp, [&] { return rms::forward(kOp, in, ctx); });
}

ws1::Result<ws1::Tensors> backward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return ws1::ops::guarded(kOp, [&] { return rms::backward(kOp, in, ctx); });
}

}  // namespace

const CudaOp& rms_norm_cuda() {
  static const CudaOp op{kOp, forward, backward, rms::kForwardKernels, rms::kBackwardKernels};
  return op;
}

}  // namespace ws1cuda
