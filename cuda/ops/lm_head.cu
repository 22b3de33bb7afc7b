// lm_head on cuda_bf16: not implemented yet (the backend reports a missing kernel).
#include "registry.hpp"

namespace ws1cuda {

const CudaOp& lm_head_cuda() {
  static const CudaOp op{"lm_head", nullptr, nullptr, "", ""};
  return op;
}

}  // namespace ws1cuda
