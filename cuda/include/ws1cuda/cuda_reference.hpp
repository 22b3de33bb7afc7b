// The cuda_fp32 reference engine (ws1/reference.hpp) on device 0. Plain C++ header.
#pragma once

#include <memory>

#include "ws1/error.hpp"
#include "ws1/reference.hpp"

namespace ws1cuda {

// The ops of cuda/reference/*_refs.cu computed on the device in FP32 (own FP32 kernels; GEMMs
// through cublasSgemm on operands widened exactly from bf16, CUBLAS_PEDANTIC_MATH set and read
// back: no TF32, no reduced-precision reduction); every other op through the CPU engine. Fails
// (environment error, exit 3) without a usable device or cuBLAS handle.
ws1::Result<std::unique_ptr<ws1::ReferenceEngine>> make_cuda_fp32_reference();

}  // namespace ws1cuda
