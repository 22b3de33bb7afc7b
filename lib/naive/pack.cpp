// pack's naive bf16 definition: varlen packing has no arithmetic, so eager's result is the exact
// one. (x [B, S, *tail] bf16, mask [B, S] bool; or x [T, *tail] with mask [T], one sequence):
//   packed     = x.reshape(-1, *tail)[mask.reshape(-1)]   (the active rows in (b, s) order, bf16)
//   cu_seqlens = [0, cumsum(mask.sum(-1))...]             (int64, [B + 1])
// backward, IndexBackward: dx = zeros_like(x) with dx[active row k] = dy.packed[k] (bf16).
// Mask bytes must be 0 or 1. Inputs, their checks and the segments: lib/ref's
// (../ref/pack_inputs.hpp).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "../ref/pack_inputs.hpp"
#include "support.hpp"

namespace ws1::naive {
namespace {

using ref::PackInputs;

// Copies bf16 rows of `width` elements: to row to(k) of `dst` from row from(k) of `src`, for
// every packed row k.
template <class To, class From>
void copy_rows(const Tensor& src, Tensor& dst, const PackInputs& p, To to, From from) {
  const Tensor s = src.is_contiguous() ? src : src.contiguous();
  const auto* in = s.data<std::uint16_t>();
  auto* out = dst.data<std::uint16_t>();
  for (std::size_t k = 0; k < p.active.size(); ++k)
    std::copy_n(in + from(k) * p.width, p.width, out + to(k) * p.width);
}

}  // namespace

Tensors pack_forward(const Call& call) {
  const PackInputs p = ref::read_pack_inputs(call);
  Tensor packed(DType::kBF16, p.packed_shape);
  copy_rows(call.tensor("x", DType::kBF16), packed, p, [](std::size_t k) { return static_cast<std::int64_t>(k); },
            [&](std::size_t k) { return p.active[k]; });
  return {{"packed", std::move(packed)}, {"cu_seqlens", p.cu_seqlens_tensor()}};
}

Tensors pack_backward(const Call& call) {
  const PackInputs p = ref::read_pack_inputs(call);
  const Tensor& dy = ref::read_pack_dy(call, p);
  Tensor dx(DType::kBF16, p.x_shape);  // zero-filled: the inactive rows
  copy_rows(dy, dx, p, [&](std::size_t k) { return p.active[k]; },
            [](std::size_t k) { return static_cast<std::int64_t>(k); });
  return {{"dx", std::move(dx)}};
}

}  // namespace ws1::naive
