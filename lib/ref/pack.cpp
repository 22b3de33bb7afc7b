// pack's FP32 reference: varlen packing, (x [B, S, *tail] bf16, mask [B, S] bool) ->
// packed [A, *tail] FP32 and cu_seqlens [B + 1] int64, A the number of true mask entries.
// packed holds the rows of x whose mask is true in row-major (b, s) order (the exact upcast);
// cu_seqlens[0] = 0, cu_seqlens[b + 1] = cu_seqlens[b] + (true entries of sequence b).
// x [T, *tail] with mask [T] is one sequence. Mask bytes must be 0 or 1.
// Backward: dx shaped like x, FP32; packed row k of dy.packed goes back to the k-th active row
// of x, every other row +0. Inputs, their checks and the segments: pack_inputs.hpp.
#include <cstdint>
#include <utility>
#include <vector>

#include "pack_inputs.hpp"
#include "support.hpp"
#include "ws1/numeric.hpp"

namespace ws1::ref {
namespace {

// Row `from` of the bf16 rows `src` widened (exactly) into `to`. The rows are widened where
// they are copied, in parallel, rather than the whole tensor first.
void widen_row(const std::uint16_t* src, std::int64_t from, std::int64_t width, float* to) {
  const std::uint16_t* row = src + from * width;
  for (std::int64_t c = 0; c < width; ++c) to[c] = from_bf16(bf16{row[c]});
}

Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

}  // namespace

Tensors pack_forward(const Call& call) {
  const PackInputs p = read_pack_inputs(call);
  const Tensor x = dense(call.tensor("x", DType::kBF16));
  std::vector<float> packed(p.active.size() * static_cast<std::size_t>(p.width));
  each_index(static_cast<std::int64_t>(p.active.size()), call.ctx().threads, [&](std::int64_t k) {
    widen_row(x.data<std::uint16_t>(), p.active[static_cast<std::size_t>(k)], p.width, packed.data() + k * p.width);
  });
  return {{"packed", f32_tensor(p.packed_shape, std::move(packed))}, {"cu_seqlens", p.cu_seqlens_tensor()}};
}

Tensors pack_backward(const Call& call) {
  const PackInputs p = read_pack_inputs(call);
  const Tensor dy = dense(read_pack_dy(call, p));
  std::vector<float> dx(static_cast<std::size_t>(numel(p.x_shape)), 0.0f);
  each_index(static_cast<std::int64_t>(p.active.size()), call.ctx().threads, [&](std::int64_t k) {
    widen_row(dy.data<std::uint16_t>(), k, p.width, dx.data() + p.active[static_cast<std::size_t>(k)] * p.width);
  });
  return {{"dx", f32_tensor(p.x_shape, std::move(dx))}};
}

}  // namespace ws1::ref
