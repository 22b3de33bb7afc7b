// qk_norm on cuda_bf16: RMSNorm over head_dim for every head of every token (x [..., head_dim],
// weight [head_dim]), and its backward. It is rms_norm's kernels (rms_norm.cuh) on rows of
// head_dim (one warp per head's row at head_dim 128; dweight summed over tokens x heads in the
// declared blocked order, blocks of rows in parallel and their partials merged in block order,
// docs/decisions.md D24); what qk_norm adds is the check that x's last dimension is the run's
// head_dim.
#include "registry.hpp"
#include "rms_norm.cuh"

namespace ws1cuda {
namespace {

constexpr std::string_view kOp = "qk_norm";

ws1::Result<ws1::Tensors> forward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return ws1::ops::guarded(kOp, [&] {
    ws1::ops::check_qk_norm_head_dim(kOp, in, ctx);
    return rms::forward(kOp, in, ctx);
  });
}

ws1::Result<ws1::Tensors> backward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return ws1::ops::guarded(kOp, [&] {
    ws1::ops::check_qk_norm_head_dim(kOp, in, ctx);
    return rms::backward(kOp, in, ctx);
  });
}

}  // namespace

const CudaOp& qk_norm_cuda() {
  static const CudaOp op{kOp, forward, backward, rms::kForwardKernels, rms::kBackwardKernels};
  return op;
}

}  // namespace ws1cuda
