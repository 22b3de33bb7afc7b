// The inputs of RMSNorm over the last dimension (rms_norm, and qk_norm per head) as both engines
// read them (lib/ref's FP32 reference, norm.hpp, and lib/naive's eager bf16), checked with the
// reference's messages: x bf16 of rank >= 1 viewed as [rows, width], weight bf16 [width], the
// backward's dy.y shaped like x; qk_norm's x must end in the run's head_dim when it is known.
#pragma once

#include <cstdint>
#include <vector>

#include "support.hpp"

namespace ws1::ref::norm {

// The inputs of one RMSNorm call: x viewed as [rows, width].
struct Rows {
  Shape x_shape, w_shape;
  std::int64_t rows = 0, width = 0;
  std::vector<float> x, w, dy;  // FP32; dy only for the backward
};

// Reads and checks x, weight (and dy.y when `backward`); a misfit fails through `call`.
Rows read(const Call& call, bool backward);

// qk_norm's check, before read(): x is not a scalar and, when the run knows head_dim, its last
// dimension is head_dim (a flattened [T, H*D] is refused rather than normalised over the whole
// width).
void check_head_dim(const Call& call);

}  // namespace ws1::ref::norm
