// swiglu on cuda_bf16: not implemented yet (the backend reports a missing kernel).
#include "registry.hpp"

namespace ws1cuda {

const CudaOp& swiglu_cuda() {
  static const CudaOp op{"swiglu", nullptr, nullptr, "", ""};
  return op;
}

}  // namespace ws1cuda
