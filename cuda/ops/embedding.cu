// embedding on cuda_bf16: not implemented yet (the backend reports a missing kernel).
#include "registry.hpp"

namespace ws1cuda {

const CudaOp& embedding_cuda() {
  static const CudaOp op{"embedding", nullptr, nullptr, "", ""};
  return op;
}

}  // namespace ws1cuda
