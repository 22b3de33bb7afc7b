// Internal: attention's input checks and shape, shared by the CPU paths (attention.cpp) and the
// cuda_bf16 host function (cuda/ops/attention.cu), so both refuse the same inputs with the same
// messages. The op itself is documented at the top of attention.cpp.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ws1/op.hpp"
#include "ws1/tensor.hpp"

namespace ws1::ops {

inline constexpr std::string_view kAttentionOp = "attention";

// q [B, Hq, Sq, D]; k, v [B, Hkv, Skv, D].
struct AttentionDims {
  std::int64_t b = 0, hq = 0, hkv = 0, sq = 0, skv = 0, d = 0;
  std::int64_t group() const { return hq / hkv; }
  std::int64_t offset() const { return skv - sq; }  // bottom-right causal alignment
};

// The checked inputs: pointers into the caller's Tensors (valid while those live).
struct AttentionInputs {
  AttentionDims n;
  const Tensor* q = nullptr;
  const Tensor* k = nullptr;
  const Tensor* v = nullptr;
  const Tensor* dy = nullptr;       // "dy.o", backward only
  std::vector<std::uint8_t> valid;  // [B, Skv]: 1 = key may be attended to (key_mask, or all 1)
  float scale = 1.0f;               // 1/sqrt(D), the float32 rounding of the double value
};

// Checks q, k, v (bf16, head-major rank 4, fitting shapes), the optional key_mask ([B, Skv]
// bool, bytes 0 or 1) and, for backward, dy.o (bf16, q's shape). Throws OpInputError saying
// "attention: <tensor>: problem" for the first input that does not fit.
AttentionInputs check_attention_inputs(const Tensors& in, bool backward);

}  // namespace ws1::ops
