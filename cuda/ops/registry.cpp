#include "registry.hpp"

#include <vector>

namespace ws1cuda {
namespace {

// Built on first use: the accessors return function-local statics of other translation units.
const std::vector<CudaOp>& table() {
  static const std::vector<CudaOp> ops = [] {
    std::vector<CudaOp> v;
    // ---- one line per implemented op (keep catalogue order) ----
    v.push_back(embedding_cuda());
    v.push_back(rms_norm_cuda());
    v.push_back(qk_norm_cuda());
    v.push_back(det_gemm_cuda());
    v.push_back(rope_cuda());
    v.push_back(attention_cuda());
    v.push_back(silu_cuda());
    v.push_back(swiglu_cuda());
    v.push_back(lm_head_cuda());
    v.push_back(logp_cuda());
    v.push_back(batch_invariant_logp_cuda());
    v.push_back(pack_cuda());
    v.push_back(linear_logp_cuda());
    // ---- end of op list ----
    return v;
  }();
  return ops;
}

}  // namespace

std::span<const CudaOp> cuda_ops() { return table(); }

const CudaOp* find_cuda_op(std::string_view op) {
  for (const CudaOp& c : table())
    if (c.op == op) return &c;
  return nullptr;
}

}  // namespace ws1cuda
