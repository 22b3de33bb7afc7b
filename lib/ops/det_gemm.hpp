// Internal: det_gemm's input checks, shared by the cpu_bf16 candidate (det_gemm.cpp) and the
// cuda_bf16 kernels (cuda/ops/det_gemm.cu), so both backends refuse the same inputs with the
// same errors ("det_gemm: <tensor>: problem").
#pragma once

#include <cstdint>
#include <string_view>

#include "ws1/op.hpp"

namespace ws1::ops {

struct DetGemmInputs {
  const Tensor& a;              // [M, K] bf16
  const Tensor& b;              // [K, N] bf16
  const Tensor* dy = nullptr;   // dy.c [M, N] bf16 (backward only)
};

// a and b (bf16, rank 2, b's rows = a's columns); with_dy: also dy.c with c's shape.
DetGemmInputs det_gemm_inputs(std::string_view op, const Tensors& in, bool with_dy);

// The number of K shards the forward sums separately: 1 on a tensor-parallel rank's call
// (ctx.k_partial), else ctx.k_shards (contract: det_gemm_k_split.shards, which must be >= 1).
std::int64_t det_gemm_shards(std::string_view op, const OpContext& ctx);

}  // namespace ws1::ops
