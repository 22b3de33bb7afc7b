// rope's cpu_bf16 candidate (DESIGN §6, NOTES §c): rotary position embedding, GPT-NeoX /
// Hugging Face "rotate half". The FP32 reference is lib/ref/rope.cpp.
//
// Layouts (D = head_dim, even; every D-wide row of x has one position):
//   token-major x [T, H, D] with positions [T]            (oracle, invariance fixtures)
//   head-major  x [B, H, S, D] with positions [S] or [B, S] (accuracy fixtures: B = 1)
// Positions are absolute, int64, in [0, 2^29).
//
// Definition, h = D/2, pairs (i, i+h) — not adjacent elements (GPT-J interleaving):
//   inv_freq[i] = float32 rounding of the float64 value 1/theta^(2i/D)   (DESIGN build facts:
//                 a float32 pow differs by an ulp between libraries)
//   angle       = position * inv_freq[i], formed exactly in double (a position < 2^29 times a
//                 float32 has at most 53 significant bits)
//   c, s        = cos(angle), sin(angle) computed in double, each rounded once to float32
//   y[i]        = fma(x[i],   c, -(x[i+h] * s))      i.e. x*cos + rotate_half(x)*sin with
//   y[i+h]      = fma(x[i+h], c,   x[i]   * s )      rotate_half(x) = concat(-x2, x1)
// The angle is not rounded to float32: that rounding costs |angle| * 2^-24 rad (6e-6 at
// position 100, 2e-3 at 32768), an error of the implementation rather than of the definition,
// which would take the result out of the float32 row against float64 at long positions.
// Only the cos/sin table is formed in double; the rotation itself is FP32 with the fused
// multiply-add written out, so a CUDA kernel given the same float32 table matches bit for bit.
// The FP32 value is rounded to bf16 once.
//
// Backward: the rotation is orthogonal, so dx is dy rotated back by the same angle:
//   dx[i]   = fma(dy[i],   c,   dy[i+h] * s )
//   dx[i+h] = fma(dy[i+h], c, -(dy[i]   * s))
// Every row is independent (no reduction), so nothing depends on the row or thread count.
#include <fmt/format.h>

#include <cmath>

#include "elementwise.hpp"

namespace ws1::ops {
namespace {

constexpr std::int64_t kPositionLimit = std::int64_t{1} << 29;

RopeLayout layout_of(std::string_view op, std::string_view name, const Tensor& x, const Tensor& pos,
                     const OpContext& ctx) {
  RopeLayout l;
  require(x.dim() == 3 || x.dim() == 4, op, name,
          fmt::format("shape {} (expected [T, H, D] or [B, H, S, D])", shape_string(x.shape())));
  l.dim = x.shape().back();
  require(l.dim > 0 && l.dim % 2 == 0, op, name,
          fmt::format("shape {}: head_dim must be even and positive", shape_string(x.shape())));
  require(ctx.head_dim <= 0 || l.dim == ctx.head_dim, op, name,
          fmt::format("shape {}: last dimension is not head_dim {}", shape_string(x.shape()),
                      ctx.head_dim));
  l.rows = x.numel() / l.dim;
  const Shape& xs = x.shape();
  const Shape& ps = pos.shape();
  if (x.dim() == 3) {
    l.token_major = true;
    l.heads = xs[1];
    require(pos.dim() == 1 && ps[0] == xs[0], op, "positions",
            fmt::format("shape {} (expected [{}] for x {})", shape_string(ps), xs[0],
                        shape_string(xs)));
  } else {
    l.heads = xs[1];
    l.seq = xs[2];
    l.batched_positions = pos.dim() == 2;
    require((pos.dim() == 1 && ps[0] == xs[2]) || (pos.dim() == 2 && ps[0] == xs[0] && ps[1] == xs[2]),
            op, "positions",
            fmt::format("shape {} (expected [{}] or [{}, {}] for x {})", shape_string(ps), xs[2],
                        xs[0], xs[2], shape_string(xs)));
  }
  return l;
}

}  // namespace

RopeInputs rope_inputs(std::string_view op, const Tensors& in, const OpContext& ctx,
                       bool backward) {
  const std::string_view src = backward ? "dy.y" : "x";
  const Tensor& pos = input(in, op, "positions", DType::kI64);
  RopeInputs r;
  r.v = &input(in, op, src, DType::kBF16);
  r.layout = layout_of(op, src, *r.v, pos, ctx);
  if (const Tensor* x = find_tensor(in, "x"); x != nullptr && backward)
    require(x->shape() == r.v->shape(), op, src,
            fmt::format("shape {} differs from x {}", shape_string(r.v->shape()),
                        shape_string(x->shape())));
  require(std::isfinite(ctx.rope_theta) && ctx.rope_theta > 1.0, op, "rope_theta",
          fmt::format("{} is not a finite value above 1", ctx.rope_theta));
  const std::int64_t dim = r.layout.dim, half = dim / 2;
  r.inv_freq.resize(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i)
    r.inv_freq[static_cast<std::size_t>(i)] = static_cast<float>(
        1.0 / std::pow(ctx.rope_theta, static_cast<double>(2 * i) / static_cast<double>(dim)));
  r.positions = to_i64(pos);
  for (std::size_t k = 0; k < r.positions.size(); ++k) {
    const std::int64_t p = r.positions[k];
    require(p >= 0 && p < kPositionLimit, op, "positions",
            fmt::format("positions[{}] = {} is outside [0, 2^29)", k, p));
  }
  return r;
}

namespace {

// cos and sin per (position slot, i < D/2), float32 (see the header comment).
struct Table {
  std::int64_t half = 0;
  std::vector<float> cos, sin;
};

Table make_table(const RopeInputs& r, unsigned threads) {
  Table t;
  t.half = r.layout.dim / 2;
  const auto n = static_cast<std::int64_t>(r.positions.size());
  t.cos.resize(static_cast<std::size_t>(n * t.half));
  t.sin.resize(t.cos.size());
  parallel_for(n, threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t k = b; k < e; ++k)
      for (std::int64_t i = 0; i < t.half; ++i) {
        const double angle = static_cast<double>(r.positions[static_cast<std::size_t>(k)]) *
                             static_cast<double>(r.inv_freq[static_cast<std::size_t>(i)]);
        const auto at = static_cast<std::size_t>(k * t.half + i);
        t.cos[at] = static_cast<float>(std::cos(angle));
        t.sin[at] = static_cast<float>(std::sin(angle));
      }
  });
  return t;
}

// Rotates every row of `v` by its position's angles (sign +1) or back (sign -1).
Tensor rotate(const Tensor& vt, const RopeLayout& l, const Table& t, float sign, unsigned threads) {
  const std::vector<float> v = to_f32(vt);
  Tensor out(DType::kBF16, vt.shape());
  std::uint16_t* out_bf16 = out.data<std::uint16_t>();
  const std::int64_t h = t.half;
  parallel_for(l.rows, threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const float* c = t.cos.data() + l.slot(r) * h;
      const float* s = t.sin.data() + l.slot(r) * h;
      const float* x = v.data() + r * l.dim;
      const std::int64_t o = r * l.dim;
      for (std::int64_t i = 0; i < h; ++i) {
        const float lo = std::fma(x[i], c[i], -(sign * (x[i + h] * s[i])));
        const float hi = std::fma(x[i + h], c[i], sign * (x[i] * s[i]));
        out_bf16[o + i] = to_bf16(lo).bits;
        out_bf16[o + i + h] = to_bf16(hi).bits;
      }
    }
  });
  return out;
}

// Forward rotates x by +angle into y; backward rotates dy.y by -angle into dx.
Result<Tensors> run(std::string_view op, const Tensors& in, const OpContext& ctx, bool backward) {
  return guarded(op, [&] {
    const RopeInputs r = rope_inputs(op, in, ctx, backward);
    const Table t = make_table(r, ctx.threads);
    return Tensors{{backward ? "dx" : "y",
                    rotate(*r.v, r.layout, t, backward ? -1.0f : 1.0f, ctx.threads)}};
  });
}

Result<Tensors> forward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return run(op, in, ctx, false);
}

Result<Tensors> backward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return run(op, in, ctx, true);
}

// Either direction reads one tensor of x's size (x forward, dy.y backward: the backward does
// not read x) and the positions, and writes one of x's size.
OpWork work(const Tensors& in, bool backward) {
  const Tensor* v = find_tensor(in, backward ? "dy.y" : "x");
  const Tensor* pos = find_tensor(in, "positions");
  if (v == nullptr || pos == nullptr) return {};
  OpWork w;
  w.bytes = 2.0 * static_cast<double>(v->nbytes()) + static_cast<double>(pos->nbytes());
  return w;
}

}  // namespace

const Op& rope_op() {
  static const ElementwiseOp op("rope", {{"y", DType::kBF16}}, {{"dx", DType::kBF16}}, forward, backward, work);
  return op;
}

}  // namespace ws1::ops
