// The inputs of attention as both engines read them (lib/ref's FP32 reference and lib/naive's
// eager bf16): q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D] (bf16, widened exactly), optional
// key_mask [B, Skv] (bool), the backward's dy.o [B, Hq, Sq, D] (bf16), checked with the
// reference's messages; the scale and the visibility rule (causal bottom-right + key_mask).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "support.hpp"

namespace ws1::ref {

struct AttentionDims {
  std::int64_t b = 0, hq = 0, hkv = 0, sq = 0, skv = 0, d = 0;
  // Query heads per kv head: query head h reads kv head h / group().
  std::int64_t group() const { return hq / hkv; }
  // Keys [0, limit(i)) pass the causal test for query i (aligned bottom-right).
  std::int64_t limit(std::int64_t i) const { return std::clamp<std::int64_t>(i + (skv - sq) + 1, 0, skv); }
};

struct AttentionInputs {
  AttentionDims n;
  Shape q_shape, kv_shape;
  std::vector<float> q, k, v, dy;   // row-major upcasts; dy only for the backward
  std::vector<std::uint8_t> valid;  // [B, Skv]: key_mask, all 1 without one
  float scale = 1.0f;               // float(1 / sqrt(D))
  // Whether key j (in [0, Skv)) is visible to query i of batch b.
  bool visible(std::int64_t b, std::int64_t i, std::int64_t j) const {
    return j < n.limit(i) && valid[static_cast<std::size_t>(b * n.skv + j)] != 0;
  }
};

// Reads and checks attention's inputs (dy.o too when `backward`); a misfit fails through `call`.
AttentionInputs read_attention_inputs(const Call& call, bool backward);

}  // namespace ws1::ref
