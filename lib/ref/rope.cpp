// rope's FP32 reference: rotary position embedding, NeoX "rotate half" (pairs i and i + D/2).
// Inputs, checks and the cos/sin table: rope_inputs.hpp. Layouts, D = head_dim (even), one
// position per D-wide row:
//   token-major x [T, H, D] with positions [T]
//   head-major  x [B, H, S, D] with positions [S] (shared by the batch) or [B, S]
// positions int64 in [0, 2^29). With h = D/2 and i < h:
//   inv_freq[i] = float32(1 / theta^(2i/D)), the power and quotient taken in double
//   angle       = position * inv_freq[i] in double (exact: < 2^29 times a float32 fits 53 bits)
//   c, s        = cos(angle), sin(angle) in double, each rounded to float32
//   y[i]        = x[i] * c - x[i+h] * s           (x * cos + rotate_half(x) * sin, FP32)
//   y[i+h]      = x[i+h] * c + x[i] * s
// Backward, the transpose of that rotation (the gradient of the same definition):
//   dx[i]   = dy[i] * c + dy[i+h] * s
//   dx[i+h] = dy[i+h] * c - dy[i] * s
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "rope_inputs.hpp"
#include "support.hpp"

namespace ws1::ref {
namespace {

Tensors rotate(const Call& call, bool backward) {
  const RopeInputs r = read_rope_inputs(call, backward);
  const std::int64_t d = r.dim, h = d / 2;
  // Rows are short (head_dim): a task takes a block of them.
  const std::int64_t per = std::max<std::int64_t>(1, 4096 / d);
  std::vector<float> out(r.v.size());
  each_index((r.rows + per - 1) / per, call.ctx().threads, [&](std::int64_t task) {
    for (std::int64_t row = task * per; row < r.rows && row < (task + 1) * per; ++row) {
      const float* c = r.cos.data() + r.entry(row) * h;
      const float* s = r.sin.data() + r.entry(row) * h;
      const float* a = r.v.data() + row * d;  // first half
      const float* b = a + h;                 // second half
      float* lo = out.data() + row * d;
      float* hi = lo + h;
      if (!backward) {
        for (std::int64_t i = 0; i < h; ++i) {
          lo[i] = a[i] * c[i] - b[i] * s[i];
          hi[i] = b[i] * c[i] + a[i] * s[i];
        }
      } else {
        for (std::int64_t i = 0; i < h; ++i) {
          lo[i] = a[i] * c[i] + b[i] * s[i];
          hi[i] = b[i] * c[i] - a[i] * s[i];
        }
      }
    }
  });
  return {{backward ? "dx" : "y", f32_tensor(r.shape, std::move(out))}};
}

}  // namespace

Tensors rope_forward(const Call& call) { return rotate(call, false); }

Tensors rope_backward(const Call& call) { return rotate(call, true); }

}  // namespace ws1::ref
