// rope's input reading and FP32 cos/sin table (rope_inputs.hpp).
#include "rope_inputs.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace ws1::ref {
namespace {

constexpr std::int64_t kPositionEnd = std::int64_t{1} << 29;

}  // namespace

RopeInputs read_rope_inputs(const Call& call, bool backward) {
  const char* name = backward ? "dy.y" : "x";
  const Tensor& pt = call.tensor("positions", DType::kI64);
  const Tensor& vt = call.tensor(name, DType::kBF16);
  RopeInputs r;
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

}  // namespace ws1::ref
