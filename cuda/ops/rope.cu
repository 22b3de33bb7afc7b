// rope on cuda_bf16: not implemented yet (the backend reports a missing kernel).
#include "registry.hpp"

namespace ws1cuda {

const CudaOp& rope_cuda() {
  static const CudaOp op{"rope", nullptr, nullptr, "", ""};
  return op;
}

}  // namespace ws1cuda
