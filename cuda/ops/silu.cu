// silu on cuda_bf16: not implemented yet (the backend reports a missing kernel).
#include "registry.hpp"

namespace ws1cuda {

const CudaOp& silu_cuda() {
  static const CudaOp op{"silu", nullptr, nullptr, "", ""};
  return op;
}

}  // namespace ws1cuda
