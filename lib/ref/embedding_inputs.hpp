// The inputs of embedding as both engines read them (lib/ref's FP32 reference and lib/naive's
// eager bf16), checked with the reference's messages: ids int64 of any shape, every id in
// [0, V); table [V, H] bf16; the backward's dy.y [ids..., H] bf16.
#pragma once

#include <cstdint>
#include <vector>

#include "support.hpp"

namespace ws1::ref {

struct EmbeddingInputs {
  // The forward's table, contiguous [V, H] bf16. Only the forward reads it, and only the
  // selected rows: it is not widened as a whole (151936 x 4096 at Qwen3-8B widths).
  Tensor table;
  std::int64_t vocab = 0, hidden = 0;
  std::vector<std::int64_t> ids;
  Shape out_shape;        // ids' shape + [H]
  std::vector<float> dy;  // the backward's dy.y, FP32
};

// Reads and checks embedding's inputs (the table for the forward, dy.y for the `backward`); a
// misfit fails through `call`.
EmbeddingInputs read_embedding_inputs(const Call& call, bool backward);

}  // namespace ws1::ref
