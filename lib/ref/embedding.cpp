// embedding's FP32 reference: y[..., :] = table[ids[...], :], ids int64 of any shape, table
// [V, H] bf16, y [ids..., H] FP32 (the exact upcast of the selected rows). Every id must be in
// [0, V). Backward: dtable [V, H] FP32, row v the sum of the dy.y rows of the tokens whose id
// is v, added in increasing token index from +0; rows no id selects are +0. Inputs and their
// checks: embedding_inputs.hpp.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "embedding_inputs.hpp"
#include "support.hpp"
#include "ws1/numeric.hpp"

namespace ws1::ref {

Tensors embedding_forward(const Call& call) {
  const EmbeddingInputs g = read_embedding_inputs(call, false);
  const std::int64_t h = g.hidden;
  const auto* bits = g.table.data<std::uint16_t>();
  std::vector<float> y(g.ids.size() * static_cast<std::size_t>(h));
  each_index(static_cast<std::int64_t>(g.ids.size()), call.ctx().threads, [&](std::int64_t t) {
    const std::uint16_t* row = bits + g.ids[static_cast<std::size_t>(t)] * h;
    float* out = y.data() + t * h;
    for (std::int64_t c = 0; c < h; ++c) out[c] = from_bf16(bf16{row[c]});
  });
  return {{"y", f32_tensor(g.out_shape, std::move(y))}};
}

Tensors embedding_backward(const Call& call) {
  const EmbeddingInputs g = read_embedding_inputs(call, true);
  const std::vector<float>& dy = g.dy;
  const std::int64_t h = g.hidden;
  const auto tokens = static_cast<std::int64_t>(g.ids.size());
  // Written in place rather than through f32_tensor: dtable is [V, H] (2.5 GB of FP32 at
  // Qwen3-8B widths), and the zero-filled tensor is the +0 every sum starts from.
  Tensor dtable(DType::kF32, {g.vocab, h});
  float* d = dtable.data<float>();
  // A task owns a block of columns and adds every token's row into it in token order, so each
  // element's sum has the fixed order whatever the thread count.
  constexpr std::int64_t kColumns = 256;
  each_index((h + kColumns - 1) / kColumns, call.ctx().threads, [&](std::int64_t task) {
    const std::int64_t c0 = task * kColumns, c1 = std::min(h, c0 + kColumns);
    for (std::int64_t t = 0; t < tokens; ++t) {
      float* row = d + g.ids[static_cast<std::size_t>(t)] * h;
      const float* src = dy.data() + t * h;
      for (std::int64_t c = c0; c < c1; ++c) row[c] = row[c] + src[c];
    }
  });
  return {{"dtable", std::move(dtable)}};
}

}  // namespace ws1::ref
