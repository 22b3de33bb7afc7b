// The cuda_bf16 side of one op (cuda/ops/<op>.cu): host functions that check the inputs, copy
// them to the device, launch the op's kernels and return host tensors with the same names,
// dtypes and shapes as the op's cpu_bf16 candidate (lib/ops/<op>.cpp). Plain C++ header.
#pragma once

#include <span>
#include <string_view>

#include "ws1/error.hpp"
#include "ws1/op.hpp"

namespace ws1cuda {

using OpFn = ws1::Result<ws1::Tensors> (*)(const ws1::Tensors& in, const ws1::OpContext& ctx);

struct CudaOp {
  std::string_view op;               // catalogue name, "rms_norm"
  OpFn forward = nullptr;
  OpFn backward = nullptr;           // nullptr: the op has no backward
  // The kernels each direction launches, in launch order ("rms_norm_fwd_kernel"); part of the
  // kernel id written into the evidence.
  std::string_view forward_kernels;
  std::string_view backward_kernels;
};

// Every op with a cuda_bf16 implementation, in catalogue order.
std::span<const CudaOp> cuda_ops();
const CudaOp* find_cuda_op(std::string_view op);

}  // namespace ws1cuda
