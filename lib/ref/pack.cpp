// pack's FP32 reference: varlen packing, (x [B, S, *tail] bf16, mask [B, S] bool) ->
// packed [A, *tail] FP32 and cu_seqlens [B + 1] int64, A the number of true mask entries.
// packed holds the rows of x whose mask is true in row-major (b, s) order (the exact upcast);
// cu_seqlens[0] = 0, cu_seqlens[b + 1] = cu_seqlens[b] + (true entries of sequence b).
// x [T, *tail] with mask [T] is one sequence. Mask bytes must be 0 or 1.
// Backward: dx shaped like x, FP32; packed row k of dy.packed goes back to the k-th active row
// of x, every other row +0.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "support.hpp"
#include "ws1/numeric.hpp"

namespace ws1::ref {
namespace {

struct Packing {
  Shape x_shape, packed_shape;
  std::int64_t width = 0;              // elements per row: the product of the tail
  std::vector<std::int64_t> active;    // flat (b, s) index of each packed row, in order
  std::vector<std::int64_t> cu_seqlens;
};

Packing read(const Call& call) {
  Packing p;
  p.x_shape = call.tensor("x", DType::kBF16).shape();
  const Tensor& mt = call.tensor("mask", DType::kBool);
  const Shape& ms = mt.shape();
  call.expect(ms.size() == 1 || ms.size() == 2, "mask",
              fmt::format("shape {}, expected [B, S] or [T]", shape_text(ms)));
  const std::size_t lead = ms.size();
  call.expect(p.x_shape.size() >= lead && std::equal(ms.begin(), ms.end(), p.x_shape.begin()), "mask",
              fmt::format("shape {} is not x's leading dimensions ({})", shape_text(ms), shape_text(p.x_shape)));
  const Shape tail(p.x_shape.begin() + static_cast<std::ptrdiff_t>(lead), p.x_shape.end());
  p.width = 1;
  for (std::int64_t n : tail) p.width *= n;
  const Tensor mask = mt.is_contiguous() ? mt : mt.contiguous();
  const auto* bytes = mask.data<std::uint8_t>();
  const std::int64_t seqs = lead == 2 ? ms[0] : 1, len = ms.back();
  p.cu_seqlens.push_back(0);
  for (std::int64_t b = 0; b < seqs; ++b) {
    for (std::int64_t s = 0; s < len; ++s) {
      const std::int64_t k = b * len + s;
      call.expect(bytes[k] <= 1, "mask", fmt::format("element {} is the byte {}, not a bool (0 or 1)", k, bytes[k]));
      if (bytes[k] == 1) p.active.push_back(k);
    }
    p.cu_seqlens.push_back(static_cast<std::int64_t>(p.active.size()));
  }
  p.packed_shape = {static_cast<std::int64_t>(p.active.size())};
  p.packed_shape.insert(p.packed_shape.end(), tail.begin(), tail.end());
  return p;
}

// Row `from` of the bf16 rows `src` widened (exactly) into `to`. The rows are widened where
// they are copied, in parallel, rather than the whole tensor first.
void widen_row(const std::uint16_t* src, std::int64_t from, std::int64_t width, float* to) {
  const std::uint16_t* row = src + from * width;
  for (std::int64_t c = 0; c < width; ++c) to[c] = from_bf16(bf16{row[c]});
}

Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

}  // namespace

Tensors pack_forward(const Call& call) {
  const Packing p = read(call);
  const Tensor x = dense(call.tensor("x", DType::kBF16));
  std::vector<float> packed(p.active.size() * static_cast<std::size_t>(p.width));
  each_index(static_cast<std::int64_t>(p.active.size()), call.ctx().threads, [&](std::int64_t k) {
    widen_row(x.data<std::uint16_t>(), p.active[static_cast<std::size_t>(k)], p.width, packed.data() + k * p.width);
  });
  Tensor cu(DType::kI64, {static_cast<std::int64_t>(p.cu_seqlens.size())});
  std::copy(p.cu_seqlens.begin(), p.cu_seqlens.end(), cu.data<std::int64_t>());
  return {{"packed", f32_tensor(p.packed_shape, std::move(packed))}, {"cu_seqlens", std::move(cu)}};
}

Tensors pack_backward(const Call& call) {
  const Packing p = read(call);
  const Tensor& dyt = call.tensor("dy.packed", DType::kBF16);
  call.expect(dyt.shape() == p.packed_shape, "dy.packed",
              fmt::format("shape {}, expected {} (the active rows of x)", shape_text(dyt.shape()),
                          shape_text(p.packed_shape)));
  const Tensor dy = dense(dyt);
  std::vector<float> dx(static_cast<std::size_t>(numel(p.x_shape)), 0.0f);
  each_index(static_cast<std::int64_t>(p.active.size()), call.ctx().threads, [&](std::int64_t k) {
    widen_row(dy.data<std::uint16_t>(), k, p.width, dx.data() + p.active[static_cast<std::size_t>(k)] * p.width);
  });
  return {{"dx", f32_tensor(p.x_shape, std::move(dx))}};
}

}  // namespace ws1::ref
