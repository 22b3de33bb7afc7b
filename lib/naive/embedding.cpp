// embedding's naive bf16 definition, ids int64 of any shape, table [V, H] bf16:
//   y = table[ids]                 (F.embedding: a gather, exact; y [ids..., H] bf16)
// backward, embedding_dense_backward as the CUDA kernel runs it (no bf16 partial sums):
//   dtable[v] = bf(sum over the tokens t with ids[t] == v of dy[t]), the sum in FP32 from +0 in
//   increasing token index; rows no id selects are +0.
// Inputs and their checks: lib/ref's (../ref/embedding_inputs.hpp).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "../ref/embedding_inputs.hpp"
#include "support.hpp"

namespace ws1::naive {

Tensors embedding_forward(const Call& call) {
  const ref::EmbeddingInputs g = ref::read_embedding_inputs(call, false);
  const auto* rows = g.table.data<std::uint16_t>();
  const std::int64_t h = g.hidden;
  Tensor y(DType::kBF16, g.out_shape);
  auto* out = y.data<std::uint16_t>();
  // Only the selected rows are read (the table is [151936, 4096] at Qwen3-8B widths).
  for (std::size_t t = 0; t < g.ids.size(); ++t)
    std::copy_n(rows + g.ids[t] * h, h, out + static_cast<std::int64_t>(t) * h);
  return {{"y", std::move(y)}};
}

Tensors embedding_backward(const Call& call) {
  const ref::EmbeddingInputs g = ref::read_embedding_inputs(call, true);
  const std::vector<float>& dy = g.dy;
  const std::int64_t h = g.hidden;
  // Tokens grouped by id, in increasing token index within an id (stable sort): each id's FP32
  // sum is one task, and only the selected rows of dtable are written.
  std::vector<std::size_t> order(g.ids.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return g.ids[a] < g.ids[b]; });
  std::vector<std::size_t> starts;  // where each id's run begins in `order`, then order.size()
  for (std::size_t k = 0; k < order.size(); ++k)
    if (k == 0 || g.ids[order[k]] != g.ids[order[k - 1]]) starts.push_back(k);
  starts.push_back(order.size());

  Tensor dtable(DType::kBF16, {g.vocab, h});  // zero-filled: the rows no id selects
  auto* out = dtable.data<std::uint16_t>();
  ref::each_index(static_cast<std::int64_t>(starts.size()) - 1, call.ctx().threads, [&](std::int64_t run) {
    const std::size_t first = starts[static_cast<std::size_t>(run)], last = starts[static_cast<std::size_t>(run) + 1];
    std::vector<float> acc(static_cast<std::size_t>(h), 0.0f);
    for (std::size_t k = first; k < last; ++k) {
      const float* src = dy.data() + static_cast<std::int64_t>(order[k]) * h;
      for (std::int64_t c = 0; c < h; ++c) acc[static_cast<std::size_t>(c)] += src[c];
    }
    std::uint16_t* row = out + g.ids[order[first]] * h;
    for (std::int64_t c = 0; c < h; ++c) row[c] = to_bf16(acc[static_cast<std::size_t>(c)]).bits;
  });
  return {{"dtable", std::move(dtable)}};
}

}  // namespace ws1::naive
