// The inputs of pack as both engines read them (lib/ref's FP32 reference and lib/naive's eager
// bf16), checked with the reference's messages: x [B, S, *tail] bf16 with mask [B, S] bool, or
// x [T, *tail] with mask [T] (one sequence); mask bytes 0 or 1; the backward's dy.packed
// [A, *tail] bf16, A the number of true mask entries. The segments: the active rows of x in
// row-major (b, s) order and cu_seqlens [B + 1] (cu_seqlens[0] = 0, cu_seqlens[b + 1] =
// cu_seqlens[b] + the true entries of sequence b).
#pragma once

#include <cstdint>
#include <vector>

#include "support.hpp"

namespace ws1::ref {

struct PackInputs {
  Shape x_shape, packed_shape;
  std::int64_t width = 0;              // elements per row: the product of the tail
  std::vector<std::int64_t> active;    // flat (b, s) index of each packed row, in order
  std::vector<std::int64_t> cu_seqlens;

  // cu_seqlens as the int64 [B + 1] output tensor.
  Tensor cu_seqlens_tensor() const;
};

// Reads and checks x's shape and the mask, and derives the segments; a misfit fails through `call`.
PackInputs read_pack_inputs(const Call& call);
// The backward's dy.packed, checked to be bf16 shaped like `p`'s packed rows.
const Tensor& read_pack_dy(const Call& call, const PackInputs& p);

}  // namespace ws1::ref
