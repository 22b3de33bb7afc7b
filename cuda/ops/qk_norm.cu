// qk_norm on cuda_bf16: not implemented yet (the backend reports a missing kernel).
#include "registry.hpp"

namespace ws1cuda {

const CudaOp& qk_norm_cuda() {
  static const CudaOp op{"qk_norm", nullptr, nullptr, "", ""};
  return op;
}

}  // namespace ws1cuda
