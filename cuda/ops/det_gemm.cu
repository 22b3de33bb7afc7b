// det_gemm on cuda_bf16: not implemented yet (the backend reports a missing kernel).
#include "registry.hpp"

namespace ws1cuda {

const CudaOp& det_gemm_cuda() {
  static const CudaOp op{"det_gemm", nullptr, nullptr, "", ""};
  return op;
}

}  // namespace ws1cuda
