// Internal: the tensors of a Qwen3 dense checkpoint, their Hugging Face names and shapes, and
// where each goes in ModelWeights (shared by the synthetic weights and the checkpoint loader).
#pragma once

#include <string>
#include <vector>

#include "ws1/model.hpp"

namespace ws1::model_detail {

enum class WeightKind {
  kEmbedding,   // [V, H]
  kNorm,        // [H] or [D]
  kProjection,  // HF [out, in]; the chain keeps [in, out] (det_gemm's b)
  kLmHead,      // [V, H], kept as is (linear_logp's weight)
};

struct WeightEntry {
  std::string name;     // Hugging Face name
  WeightKind kind = WeightKind::kNorm;
  Shape hf_shape;       // as stored in a checkpoint
  std::int64_t in = 0;  // a projection's input width (its reduction length)
  Tensor* slot = nullptr;  // where it goes in the ModelWeights it was made for
};

// Every tensor of `w.config`, in Hugging Face order (embedding, layers, final norm, lm_head),
// with slots pointing into `w` (whose layers are resized here).
std::vector<WeightEntry> weight_entries(ModelWeights& w);

// The chain layout of an entry's tensor: [in, out] for a projection, the HF shape otherwise.
Shape chain_shape(const WeightEntry& e);

}  // namespace ws1::model_detail
