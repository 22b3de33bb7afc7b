// Internal to lib/ref, and read by lib/naive too (reading and checking an op's inputs is not
// arithmetic, so both engines share it): the checked matrix inputs of det_gemm, lm_head and
// linear_logp (whose targets are logp_inputs.hpp's). Every failure is the Call's
// "<op>: <tensor>: <problem>"; the values are the bf16 inputs widened exactly to FP32.
#pragma once

#include <cstdint>
#include <vector>

#include "support.hpp"

namespace ws1::ref {

// det_gemm: "a" [M, K] bf16, "b" [K, N] bf16 and, with `backward`, "dy.c" [M, N] bf16.
struct DetGemmInputs {
  std::int64_t m = 0, k = 0, n = 0;
  std::vector<float> a, b;  // [M, K], [K, N]
  std::vector<float> dy;    // [M, N], backward only
};
DetGemmInputs read_det_gemm_inputs(const Call& call, bool backward);

// hidden [..., H] times weight [V, H] transposed (F.linear without bias): the shapes, checked
// once the caller has found both tensors (and any others whose presence it checks first).
struct LinearShape {
  Shape hidden_shape;
  std::int64_t rows = 1, width = 0, vocab = 0;  // rows: the product of hidden's leading dimensions
};
LinearShape linear_shape(const Call& call, const Tensor& hidden, const Tensor& weight);

// lm_head: "hidden" [..., H] bf16, "weight" [V, H] bf16 and, with `backward`, "dy.logits"
// [..., V] bf16.
struct LmHeadInputs : LinearShape {
  Shape logits_shape;               // hidden's with V for H
  std::vector<float> hidden, weight;  // [rows, H], [V, H]
  std::vector<float> dy;            // [rows, V], backward only
};
LmHeadInputs read_lm_head_inputs(const Call& call, bool backward);

}  // namespace ws1::ref
