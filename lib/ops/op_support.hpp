// Internal helpers shared by the cpu_bf16 candidates: bf16 <-> float32 buffers, row parallelism,
// the fixed-order reductions several ops use. Nothing op-specific lives here. The checked inputs
// and failures every backend shares are public: ws1/op_inputs.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ws1/error.hpp"
#include "ws1/op_inputs.hpp"
#include "ws1/op.hpp"
#include "ws1/tensor.hpp"

namespace ws1::ops {

// Work of `hidden [.., H] @ weight [V, H]ᵀ` (lm_head, linear_logp) for Op::work: forward, the
// logits product; backward, dhidden and dweight only (dy is an input; logits a kernel
// recomputes are its own cost, not work the result needs, so cuBLAS on the same shapes is
// the two GEMMs the backward replaces). {} when the tensors do not have those shapes.
OpWork projection_work(const Tensors& in, bool backward);

// A tensor's elements as float32 (bf16/f16/f32 upcast exactly), row-major.
std::vector<float> to_f32(const Tensor& t);
// A bf16 tensor of the RNE rounding of `values`.
Tensor bf16_tensor(const Shape& shape, std::span<const float> values);

// Splits [0, n) into contiguous blocks over `threads` workers (0: hardware concurrency) and
// calls body(begin, end) for each. Each index is handled by exactly one call, so results that
// are written per index do not depend on the thread count.
void parallel_for(std::int64_t n, unsigned threads, const std::function<void(std::int64_t, std::int64_t)>& body);

// Sum of x[i]*x[i] in fixed 32-wide chunks: each chunk accumulated left to right in FP32 with
// fused multiply-adds, then the
// chunk sums left to right (the statistic of DESIGN §6 rms_norm; independent of row count).
float chunked_sum_squares(const float* x, std::int64_t n);

}  // namespace ws1::ops
