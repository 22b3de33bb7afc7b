// batch_invariant_logp on cuda_bf16 (lib/ops/batch_invariant_logp.cpp states the definition):
// logp with ignore_index rows (+0, and an all +0 gradient row) and the declared per-row split.
// It runs logp's kernels (logp.cu: logp_chunk_kernel, logprob_row_kernel, logp_dlogits_kernel)
// with ignore_index honoured; logprob.cuh states the order, fixed by the vocabulary width alone
// (1024-wide chunks, each reduced sequentially by one thread, merged left to right), so a row's
// bits do not depend on the number of rows, their order or padding rows.
#include <string_view>

#include "logprob.cuh"
#include "registry.hpp"
#include "ws1/op_inputs.hpp"

namespace ws1cuda {
namespace {

constexpr std::string_view kOp = "batch_invariant_logp";

ws1::Result<ws1::Tensors> forward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return ws1::ops::guarded(kOp, [&] { return logprob::selected_logp_forward(kOp, in, ctx, true); });
}

ws1::Result<ws1::Tensors> backward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return ws1::ops::guarded(kOp, [&] { return logprob::selected_logp_backward(kOp, in, ctx, true); });
}

}  // namespace

const CudaOp& batch_invariant_logp_cuda() {
  static const CudaOp op{kOp, forward, backward, "logp_chunk_kernel,logprob_row_kernel",
                         "logp_chunk_kernel,logprob_row_kernel,logp_dlogits_kernel"};
  return op;
}

}  // namespace ws1cuda
