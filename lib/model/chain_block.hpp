// Internal: one block of rows going through the chain (chain.cpp, chain_rollout.cpp). A block is
// either n consecutive tokens of one sequence against one cache (teacher forcing, prefill, a
// decode step) or one token of each of B sequences, each against its own cache (a batched
// decode step).
#pragma once

#include <string>
#include <vector>

#include "ws1/model.hpp"

namespace ws1 {

struct Chain::Block {
  std::int64_t rows = 0;
  std::vector<std::int64_t> pos;  // each row's position in its sequence
  bool per_row = false;           // batched decode: caches and traces are one per row
  std::vector<KvCache*> caches;   // one (the sequence's), or one per row
  std::vector<Trace*> traces;     // as caches; entries may be null
  Tensor positions;               // int64 [rows] = pos
  std::vector<float> residual;    // FP32 [rows, H]

  // n tokens of one sequence from position `first` (cache and trace may be null).
  static Block run(std::int64_t first, std::int64_t n, KvCache* cache, Trace* trace);
  // One token of each sequence, at each cache's length.
  static Block batch(std::span<KvCache* const> caches, std::span<Trace* const> traces);

  void record(std::int64_t layer, ChainNode node, const Tensor& t) const;
  Tensor residual_tensor(std::int64_t h) const;
  std::string where() const;  // "positions [8, 9)" or "decode batch at positions [9, 14, 10]"
};

namespace model_detail {

// A bf16 tensor of t's values: t itself when it is bf16, its RNE rounding when float32.
Tensor as_bf16(const Tensor& t);
Tensor i64_tensor(std::span<const std::int64_t> values);

}  // namespace model_detail
}  // namespace ws1
