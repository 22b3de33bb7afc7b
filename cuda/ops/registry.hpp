// Internal: one accessor per op's cuda_bf16 implementation (each defined in cuda/ops/<op>.cu).
#pragma once

#include "ws1/op_list.hpp"
#include "ws1cuda/cuda_op.hpp"

namespace ws1cuda {

// <op>_cuda(), defined in cuda/ops/<op>.cu, for every op of ws1/op_list.hpp.
#define WS1_DECLARE_CUDA_OP(name) const CudaOp& name##_cuda();
WS1_OP_LIST(WS1_DECLARE_CUDA_OP)
#undef WS1_DECLARE_CUDA_OP

}  // namespace ws1cuda
