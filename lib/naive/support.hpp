// Internal to lib/naive: the eager-BF16 building blocks. Inputs are read through lib/ref's checked
// Call (reading is not arithmetic); every result an eager op would store is rounded to bf16 here.
#pragma once

#include <cstdint>
#include <vector>

#include "../ref/support.hpp"
#include "ws1/numeric.hpp"
#include "ws1/op_list.hpp"

namespace ws1::naive {

using ref::BadInput;
using ref::Call;

// The bf16 result of one eager op whose FP32 value is x (round to nearest even).
inline float bf(float x) { return round_bf16(x); }
// Every element rounded to bf16, in place; returns v.
std::vector<float>& bf_all(std::vector<float>& v);

// A bf16 tensor of `values` (each rounded to bf16; values.size() == the shape's element count).
Tensor bf16_tensor(const Shape& shape, const std::vector<float>& values);
// A float32 tensor of `values` rounded to bf16 and widened: a declared float32 output that eager
// computes in bf16 (logprob outputs).
Tensor widened_tensor(const Shape& shape, const std::vector<float>& values);

// An eager bf16 matmul (cuBLAS / PyTorch CPU semantics): products accumulated in FP32, each
// output rounded to bf16 once. c[m, n] = a[m, k] @ b[k, n]; b_rows_are_n: b is given as [n, k].
void matmul_bf16(const float* a, const float* b, float* c, std::int64_t m, std::int64_t k, std::int64_t n,
                 bool b_rows_are_n, unsigned threads);
// An eager bf16 sum over x[0..n) (torch.sum, mean's numerator): FP32 accumulation, pairwise, the
// result NOT rounded (the caller rounds what the eager op stores: sum -> bf(sum), mean ->
// bf(sum / n)).
float sum_fp32(const float* x, std::int64_t n);

// ---- one pair per op of ws1/op_list.hpp (lib/naive/<op>.cpp) ----
#define WS1_NAIVE_OP(name)                  \
  Tensors name##_forward(const Call& call); \
  Tensors name##_backward(const Call& call);
WS1_OP_LIST(WS1_NAIVE_OP)
#undef WS1_NAIVE_OP

}  // namespace ws1::naive
