// attention on cuda_bf16: not implemented yet (the backend reports a missing kernel).
#include "registry.hpp"

namespace ws1cuda {

const CudaOp& attention_cuda() {
  static const CudaOp op{"attention", nullptr, nullptr, "", ""};
  return op;
}

}  // namespace ws1cuda
