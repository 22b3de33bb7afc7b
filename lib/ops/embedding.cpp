// embedding's cpu_bf16 candidate (DESIGN §6, NOTES §c): y[..., :] = table[ids[...], :], a row
// gather; the FP32 reference is lib/ref/embedding.cpp.
// Inputs ids (int64, any shape; fixture [T]) and table [V, H] bf16; output y [ids..., H].
// Every id must lie in [0, V): anything else is an error naming the element, never a read
// outside the table.
//
// Forward: the gathered rows' bf16 bits are copied (exact).
//
// Backward: dtable [V, H], zero in rows no id selects; row v is the sum of the dy rows of
// the tokens with id v, in FP32, in a fixed order: tokens grouped by id, and within an id
// added left to right in increasing token index, starting from +0. One thread owns one id's
// row (no atomics), so the result does not depend on the thread count. Each sum is rounded to
// bf16 once.
// Only the rows that ids select are read or written, so the cost is O(T x H) plus the
// zero-filled [V, H] output (151936 x 4096 at Qwen3-8B widths).
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "elementwise.hpp"

namespace ws1::ops {

EmbeddingInputs embedding_inputs(std::string_view op, const Tensors& in, bool backward) {
  const Tensor& idt = input(in, op, "ids", DType::kI64);
  EmbeddingInputs g;
  g.table = &input(in, op, "table", DType::kBF16, 2);
  g.vocab = g.table->shape()[0];
  g.hidden = g.table->shape()[1];
  g.ids = to_i64(idt);
  for (std::size_t k = 0; k < g.ids.size(); ++k)
    require(g.ids[k] >= 0 && g.ids[k] < g.vocab, op, "ids",
            fmt::format("element {} = {} is outside [0, {}) (table rows)", k, g.ids[k], g.vocab));
  g.out_shape = idt.shape();
  g.out_shape.push_back(g.hidden);
  if (backward) {
    g.dy = &input(in, op, "dy.y", DType::kBF16);
    require(g.dy->shape() == g.out_shape, op, "dy.y",
            fmt::format("shape {} (expected {})", shape_string(g.dy->shape()),
                        shape_string(g.out_shape)));
  }
  return g;
}

namespace {

// The contiguous bf16 bits of a tensor (a handle copy when it is contiguous already).
Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

Result<Tensors> forward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return guarded(op, [&] {
    const EmbeddingInputs g = embedding_inputs(op, in, false);
    const Tensor table = dense(*g.table);
    const auto* src = table.data<std::uint16_t>();
    const auto tokens = static_cast<std::int64_t>(g.ids.size());
    const std::int64_t h = g.hidden;
    Tensor y(DType::kBF16, g.out_shape);
    auto* out = y.data<std::uint16_t>();
    parallel_for(tokens, ctx.threads, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t t = b; t < e; ++t)
        std::copy_n(src + g.ids[static_cast<std::size_t>(t)] * h, h, out + t * h);
    });
    return Tensors{{"y", std::move(y)}};
  });
}

Result<Tensors> backward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return guarded(op, [&] {
    const EmbeddingInputs g = embedding_inputs(op, in, true);
    const std::vector<float> dy = to_f32(*g.dy);
    const std::int64_t h = g.hidden;
    // Token indices ordered by id, then by token index (stable sort): the summation order.
    std::vector<std::int64_t> order(g.ids.size());
    std::iota(order.begin(), order.end(), std::int64_t{0});
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
      return g.ids[static_cast<std::size_t>(a)] < g.ids[static_cast<std::size_t>(b)];
    });
    std::vector<std::size_t> starts;  // where each id's run begins in `order`
    for (std::size_t k = 0; k < order.size(); ++k)
      if (k == 0 || g.ids[static_cast<std::size_t>(order[k])] !=
                        g.ids[static_cast<std::size_t>(order[k - 1])])
        starts.push_back(k);
    starts.push_back(order.size());
    const auto groups = static_cast<std::int64_t>(starts.size()) - 1;

    const Shape shape = {g.vocab, h};
    Tensor dtable(DType::kBF16, shape);
    auto* out_bf16 = dtable.data<std::uint16_t>();
    parallel_for(groups, ctx.threads, [&](std::int64_t b, std::int64_t e) {
      std::vector<float> acc(static_cast<std::size_t>(h));
      for (std::int64_t grp = b; grp < e; ++grp) {
        const std::size_t first = starts[static_cast<std::size_t>(grp)];
        const std::size_t last = starts[static_cast<std::size_t>(grp) + 1];
        const std::int64_t id = g.ids[static_cast<std::size_t>(order[first])];
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (std::size_t k = first; k < last; ++k) {
          const float* row = dy.data() + order[k] * h;
          for (std::int64_t c = 0; c < h; ++c) acc[static_cast<std::size_t>(c)] += row[c];
        }
        for (std::int64_t c = 0; c < h; ++c) out_bf16[id * h + c] = to_bf16(acc[static_cast<std::size_t>(c)]).bits;
      }
    });
    return Tensors{{"dtable", std::move(dtable)}};
  });
}

// The table is read sparsely: a forward moves the ids and T rows in and out; a backward reads
// the ids and dy and writes the whole dtable.
OpWork work(const Tensors& in, bool backward) {
  const Tensor* ids = find_tensor(in, "ids");
  const Tensor* table = find_tensor(in, "table");
  if (ids == nullptr || table == nullptr || table->dim() != 2) return {};
  const double id_bytes = static_cast<double>(ids->nbytes());
  const double rows = static_cast<double>(ids->numel()) * static_cast<double>(table->shape()[1]) * 2.0;
  OpWork w;
  w.bytes = backward ? id_bytes + rows + static_cast<double>(table->nbytes()) : id_bytes + 2.0 * rows;
  return w;
}

}  // namespace

const Op& embedding_op() {
  static const ElementwiseOp op("embedding", {{"y", DType::kBF16}}, {{"dtable", DType::kBF16}}, forward,
                                backward, work);
  return op;
}

}  // namespace ws1::ops
