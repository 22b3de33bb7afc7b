// rope's FP32 reference: rotary position embedding, NeoX "rotate half" (pairs i and i + D/2).
// Layouts, D = head_dim (even), one position per D-wide row:
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
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "support.hpp"

namespace ws1::ref {
namespace {

constexpr std::int64_t kPositionEnd = std::int64_t{1} << 29;

// The checked inputs: the rows to rotate and, per position entry, its cos/sin row.
struct Rope {
  Shape shape;
  std::int64_t rows = 0, dim = 0, heads = 0, seq = 0;
  bool token_major = false, per_batch = false;
  std::vector<float> v;             // x (forward) or dy.y (backward), FP32
  std::vector<float> cos, sin;      // [positions, D/2]

  // The positions entry of row `row` (row-major over all but the last dimension of v).
  std::int64_t entry(std::int64_t row) const {
    if (token_major) return row / heads;  // row = t*H + h
    const std::int64_t s = row % seq;     // row = (b*H + h)*S + s
    return per_batch ? row / (heads * seq) * seq + s : s;
  }
};

Rope read(const Call& call, bool backward) {
  const char* name = backward ? "dy.y" : "x";
  const Tensor& pt = call.tensor("positions", DType::kI64);
  const Tensor& vt = call.tensor(name, DType::kBF16);
  Rope r;
  r.shape = vt.shape();
  const Shape& ps = pt.shape();
  call.expect(vt.dim() == 3 || vt.dim() == 4, name,
              fmt::format("shape {}: neither [T, H, D] nor [B, H, S, D]", shape_text(r.shape)));
  r.dim = r.shape.back();
  call.expect(r.dim > 0 && r.dim % 2 == 0, name,
              fmt::format("shape {}: head_dim must be positive and even", shape_text(r.shape)));
  const std::int64_t head_dim = call.ctx().head_dim;
  call.expect(head_dim <= 0 || r.dim == head_dim, name,
              fmt::format("shape {} does not end in head_dim {}", shape_text(r.shape), head_dim));
  r.heads = r.shape[1];
  if (vt.dim() == 3) {
    r.token_major = true;
    call.expect(pt.dim() == 1 && ps[0] == r.shape[0], "positions",
                fmt::format("shape {}, expected [{}] (one per token of {})", shape_text(ps), r.shape[0],
                            shape_text(r.shape)));
  } else {
    r.seq = r.shape[2];
    r.per_batch = pt.dim() == 2;
    const bool shared = pt.dim() == 1 && ps[0] == r.seq;
    const bool batched = pt.dim() == 2 && ps[0] == r.shape[0] && ps[1] == r.seq;
    call.expect(shared || batched, "positions",
                fmt::format("shape {}, expected [{}] or [{}, {}] for {}", shape_text(ps), r.seq, r.shape[0],
                            r.seq, shape_text(r.shape)));
  }
  if (backward && call.has("x")) {
    const Shape& xs = call.tensor("x", DType::kBF16).shape();
    call.expect(xs == r.shape, name, fmt::format("shape {} is not x's {}", shape_text(r.shape), shape_text(xs)));
  }
  const double theta = call.ctx().rope_theta;
  call.expect(std::isfinite(theta) && theta > 1.0, "rope_theta",
              fmt::format("{} is not a finite number above 1", theta));
  const std::vector<std::int64_t> pos = call.integers("positions");
  for (std::size_t k = 0; k < pos.size(); ++k)
    call.expect(pos[k] >= 0 && pos[k] < kPositionEnd, "positions",
                fmt::format("element {} is {}, outside [0, 2^29)", k, pos[k]));

  const std::int64_t half = r.dim / 2;
  std::vector<float> inv_freq(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i)
    inv_freq[static_cast<std::size_t>(i)] =
        static_cast<float>(1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(r.dim)));
  const auto entries = static_cast<std::int64_t>(pos.size());
  r.cos.resize(static_cast<std::size_t>(entries * half));
  r.sin.resize(r.cos.size());
  each_index(entries, call.ctx().threads, [&](std::int64_t k) {
    const auto p = static_cast<double>(pos[static_cast<std::size_t>(k)]);
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle = p * static_cast<double>(inv_freq[static_cast<std::size_t>(i)]);
      r.cos[static_cast<std::size_t>(k * half + i)] = static_cast<float>(std::cos(angle));
      r.sin[static_cast<std::size_t>(k * half + i)] = static_cast<float>(std::sin(angle));
    }
  });
  r.rows = vt.numel() / r.dim;
  r.v = call.floats(name);
  return r;
}

Tensors rotate(const Call& call, bool backward) {
  const Rope r = read(call, backward);
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
