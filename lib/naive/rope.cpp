// rope's naive bf16 definition: HF's apply_rotary_pos_emb with no upcast of q/k, NeoX
// "rotate half" (pairs i and i + h, h = D/2). cos/sin are lib/ref's FP32 values (inv_freq and
// angle in double, cos/sin rounded to float32), then cast to bf16 as HF casts them to x's dtype:
//   c = bf(cos), s = bf(sin);  y = bf(bf(x * c) + bf(rotate_half(x) * s)), rotate_half(x) =
//   cat(-x[h:], x[:h]) exact, i.e. y[i] = bf(bf(x[i]*c) + bf(-x[i+h]*s)),
//                                   y[i+h] = bf(bf(x[i+h]*c) + bf(x[i]*s))
// backward by autograd (the add passes dy to both products; rotate_half's grad is exact):
//   dx[i] = bf(bf(dy[i]*c) + bf(dy[i+h]*s)),  dx[i+h] = bf(bf(dy[i+h]*c) - bf(dy[i]*s))
// Layouts, checks and the FP32 cos/sin: lib/ref's (../ref/rope_inputs.hpp): token-major x
// [T, H, D] with positions [T]; head-major [B, H, S, D] with positions [S] or [B, S]; positions
// int64 in [0, 2^29).
#include <cstdint>
#include <vector>

#include "../ref/rope_inputs.hpp"
#include "norm.hpp"

namespace ws1::naive {
namespace {

Tensors rotate(const Call& call, bool backward) {
  // lib/ref's inputs, checks and FP32 cos/sin; HF casts cos/sin to x's dtype (bf16).
  ref::RopeInputs r = ref::read_rope_inputs(call, backward);
  bf_all(r.cos);
  bf_all(r.sin);
  const std::int64_t h = r.dim / 2;
  // The forward rotates by +angle, the backward (the transpose) by -angle: the sign of s.
  const float sign = backward ? -1.0f : 1.0f;
  std::vector<float> out(r.v.size());
  each_row(r.rows, r.dim, call.ctx().threads, [&](std::int64_t row, float*) {
    const float* c = r.cos.data() + r.entry(row) * h;
    const float* s = r.sin.data() + r.entry(row) * h;
    const float* a = r.v.data() + row * r.dim;  // first half
    const float* b = a + h;                     // second half
    float* lo = out.data() + row * r.dim;
    float* hi = lo + h;
    for (std::int64_t i = 0; i < h; ++i) {
      lo[i] = bf(bf(a[i] * c[i]) - sign * bf(b[i] * s[i]));
      hi[i] = bf(bf(b[i] * c[i]) + sign * bf(a[i] * s[i]));
    }
  });
  return {{backward ? "dx" : "y", bf16_tensor(r.shape, out)}};
}

}  // namespace

Tensors rope_forward(const Call& call) { return rotate(call, false); }

Tensors rope_backward(const Call& call) { return rotate(call, true); }

}  // namespace ws1::naive
