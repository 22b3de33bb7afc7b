#include "registry.hpp"

#include <vector>

namespace ws1cuda {
namespace {

// Built on first use: the accessors return function-local statics of other translation units.
const std::vector<CudaOp>& table() {
  static const std::vector<CudaOp> ops = [] {
    std::vector<CudaOp> v;
#define WS1_PUSH_CUDA_OP(name) v.push_back(name##_cuda());
    WS1_OP_LIST(WS1_PUSH_CUDA_OP)
#undef WS1_PUSH_CUDA_OP
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
