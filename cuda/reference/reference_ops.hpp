// The cuda_fp32 engine's per-op FP32 references (spec §3.1 on the device): each family file
// adds its ops to the engine's table. An entry computes the op's reference outputs — the same
// tensor names, shapes and meaning as the lib/ops CPU reference, FP32 — from the fixture's host
// tensors; it throws ws1::ops::OpInputError on inputs the op refuses (as the CPU reference does).
#pragma once

#include <cublas_v2.h>

#include <functional>
#include <map>
#include <string>

#include "ws1/op.hpp"

namespace ws1cuda::reference {

struct DeviceRef {
  // What computes it, recorded in the evidence (cell.reference.engine), e.g.
  // "cuda_fp32 (cublasSgemm per 32-long K slice, pairwise tree, on bf16 operands widened to FP32)".
  std::string engine;
  bool uses_cublas = false;  // true: the cell records the handle's math mode
  std::function<ws1::Tensors(const ws1::Tensors& in, const ws1::OpContext& ctx, cublasHandle_t blas)> forward;
  std::function<ws1::Tensors(const ws1::Tensors& in, const ws1::OpContext& ctx, cublasHandle_t blas)> backward;
};
using Table = std::map<std::string, DeviceRef, std::less<>>;

void add_gemm_refs(Table& t);       // gemm_refs.cu: det_gemm, lm_head
void add_logprob_refs(Table& t);    // logprob_refs.cu: logp, batch_invariant_logp, linear_logp
void add_attention_refs(Table& t);  // attention_ref.cu: attention
void add_pointwise_refs(Table& t);  // pointwise_refs.cu: rms_norm, qk_norm, rope, swiglu, silu, embedding, pack

}  // namespace ws1cuda::reference
