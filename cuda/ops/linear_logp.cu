// linear_logp on cuda_bf16: not implemented yet (the backend reports a missing kernel).
#include "registry.hpp"

namespace ws1cuda {

const CudaOp& linear_logp_cuda() {
  static const CudaOp op{"linear_logp", nullptr, nullptr, "", ""};
  return op;
}

}  // namespace ws1cuda
