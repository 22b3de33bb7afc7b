// embedding's input reading (embedding_inputs.hpp).
#include "embedding_inputs.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace ws1::ref {

EmbeddingInputs read_embedding_inputs(const Call& call, bool backward) {
  EmbeddingInputs g;
  const Tensor& idt = call.tensor("ids", DType::kI64);
  const Tensor& table = call.tensor("table", DType::kBF16, 2);
  g.vocab = table.shape()[0];
  g.hidden = table.shape()[1];
  g.ids = call.integers("ids");
  for (std::size_t k = 0; k < g.ids.size(); ++k)
    call.expect(g.ids[k] >= 0 && g.ids[k] < g.vocab, "ids",
                fmt::format("element {} is {}, not a row of the table [0, {})", k, g.ids[k], g.vocab));
  g.out_shape = idt.shape();
  g.out_shape.push_back(g.hidden);
  if (backward) {
    const Tensor& dy = call.tensor("dy.y", DType::kBF16);
    call.expect(dy.shape() == g.out_shape, "dy.y",
                fmt::format("shape {}, expected {} (ids' shape + [H])", shape_text(dy.shape()),
                            shape_text(g.out_shape)));
    g.dy = call.floats("dy.y");
  } else {
    g.table = table.is_contiguous() ? table : table.contiguous();
  }
  return g;
}

}  // namespace ws1::ref
