// The inputs of rope as both engines read them (lib/ref's FP32 reference and lib/naive's eager
// bf16), checked with the reference's messages. Layouts, D = head_dim (even), one position per
// D-wide row:
//   token-major x [T, H, D] with positions [T]
//   head-major  x [B, H, S, D] with positions [S] (shared by the batch) or [B, S]
// positions int64 in [0, 2^29). The cos/sin table is the reference's FP32 one, h = D/2, i < h:
//   inv_freq[i] = float32(1 / theta^(2i/D)), the power and quotient taken in double
//   angle       = position * inv_freq[i] in double (exact: < 2^29 times a float32 fits 53 bits)
//   c, s        = cos(angle), sin(angle) in double, each rounded to float32
#pragma once

#include <cstdint>
#include <vector>

#include "support.hpp"

namespace ws1::ref {

// The checked inputs: the rows to rotate and, per position entry, its cos/sin row.
struct RopeInputs {
  Shape shape;
  std::int64_t rows = 0, dim = 0, heads = 0, seq = 0;
  bool token_major = false, per_batch = false;
  std::vector<float> v;             // x (forward) or dy.y (backward), FP32
  std::vector<float> cos, sin;      // [positions, D/2], FP32

  // The positions entry of row `row` (row-major over all but the last dimension of v).
  std::int64_t entry(std::int64_t row) const {
    if (token_major) return row / heads;  // row = t*H + h
    const std::int64_t s = row % seq;     // row = (b*H + h)*S + s
    return per_batch ? row / (heads * seq) * seq + s : s;
  }
};

// Reads and checks rope's inputs (dy.y, and x's shape when given, for the `backward`) and
// derives the cos/sin table; a misfit fails through `call`.
RopeInputs read_rope_inputs(const Call& call, bool backward);

}  // namespace ws1::ref
