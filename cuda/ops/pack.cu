// pack on cuda_bf16: not implemented yet (the backend reports a missing kernel).
#include "registry.hpp"

namespace ws1cuda {

const CudaOp& pack_cuda() {
  static const CudaOp op{"pack", nullptr, nullptr, "", ""};
  return op;
}

}  // namespace ws1cuda
