// The cuda_bf16 backend: the kernels of cuda/ops on device 0. Plain C++ header.
#pragma once

#include <memory>

#include "ws1/backend.hpp"
#include "ws1/error.hpp"

namespace ws1cuda {

// Fails (environment error, exit 3) when no CUDA device can be used.
ws1::Result<std::unique_ptr<ws1::Backend>> make_cuda_bf16_backend();

// Registers what this library offers with lib's registry (ws1/backend.hpp): the cuda_bf16
// backend (the default where a GPU is present) and the cuda_fp32 reference engine. Once, before
// a backend is opened by name.
void register_engines();

}  // namespace ws1cuda
