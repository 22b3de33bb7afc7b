// First-drift localisation (`parity --strict`): every node's output rows by token position, as
// raw bits, and the first node in execution order (then the first position) where the teacher
// forcing and the rollout decode traces differ.
#include <fmt/format.h>
#include <xxhash.h>

#include <cstring>

#include "ws1/model.hpp"
#include "ws1/numeric.hpp"

namespace ws1 {

std::string_view chain_node_name(ChainNode n) {
  switch (n) {
    case ChainNode::kEmbedding: return "embedding";
    case ChainNode::kInputNorm: return "input_norm";
    case ChainNode::kQProj: return "q_proj";
    case ChainNode::kKProj: return "k_proj";
    case ChainNode::kVProj: return "v_proj";
    case ChainNode::kQNorm: return "q_norm";
    case ChainNode::kKNorm: return "k_norm";
    case ChainNode::kQRope: return "q_rope";
    case ChainNode::kKRope: return "k_rope";
    case ChainNode::kAttention: return "attention";
    case ChainNode::kOProj: return "o_proj";
    case ChainNode::kAttnResidual: return "attn_residual";
    case ChainNode::kPostNorm: return "post_attention_norm";
    case ChainNode::kGateProj: return "gate_proj";
    case ChainNode::kUpProj: return "up_proj";
    case ChainNode::kSwiglu: return "swiglu";
    case ChainNode::kDownProj: return "down_proj";
    case ChainNode::kMlpResidual: return "mlp_residual";
    case ChainNode::kFinalNorm: return "final_norm";
    case ChainNode::kLogp: return "logp";
  }
  return "?";
}

std::string FirstDrift::text() const {
  if (element < 0)
    return fmt::format("layer {} {}, position {}: row digests differ ({} rows differ)", layer, chain_node_name(node),
                       position, differing);
  return fmt::format("layer {} {}, position {} element {}: {} against {} ({} elements differ)",
                     layer, chain_node_name(node), position, element, lhs, rhs, differing);
}

void Trace::record(std::int64_t layer, ChainNode node, std::int64_t first, const Tensor& t) {
  const Tensor c = t.is_contiguous() ? t : t.contiguous();
  const std::int64_t rows = c.dim() == 0 ? 1 : c.shape()[0];
  const std::int64_t width = rows == 0 ? 0 : c.numel() / rows;
  Rows& r = nodes_[{layer, static_cast<int>(node)}];
  r.dtype = c.dtype();
  r.width = width;
  const std::size_t row_bytes = static_cast<std::size_t>(width) * dtype_size(c.dtype());
  const std::byte* src = c.raw();
  for (std::int64_t s = 0; s < rows; ++s) {
    const std::byte* row = src + static_cast<std::size_t>(s) * row_bytes;
    std::vector<std::byte>& kept = r.by_position[first + s];
    if (!digest_) {
      kept.assign(row, row + row_bytes);
      continue;
    }
    const XXH64_hash_t h = XXH3_64bits(row, row_bytes);
    kept.resize(sizeof h);
    std::memcpy(kept.data(), &h, sizeof h);
  }
}

namespace {

double element_value(const std::vector<std::byte>& row, DType dtype, std::int64_t i) {
  if (dtype == DType::kBF16) {
    std::uint16_t bits = 0;
    std::memcpy(&bits, row.data() + i * 2, 2);
    return from_bf16(bf16{bits});
  }
  float f = 0;
  std::memcpy(&f, row.data() + i * 4, 4);
  return f;
}

}  // namespace

std::optional<FirstDrift> first_drift(const Trace& lhs, const Trace& rhs) {
  if (lhs.digest_ || rhs.digest_) {
    // Digest traces: the first (node, position) whose row digests differ, and how many rows do.
    for (const auto& [key, a] : lhs.nodes_) {
      auto it = rhs.nodes_.find(key);
      if (it == rhs.nodes_.end()) continue;
      std::optional<FirstDrift> found;
      for (const auto& [pos, row_a] : a.by_position) {
        auto rb = it->second.by_position.find(pos);
        if (rb == it->second.by_position.end() || rb->second == row_a) continue;
        if (!found) found = FirstDrift{key.first, static_cast<ChainNode>(key.second), pos, -1, 0, 0, 0};
        ++found->differing;
      }
      if (found) return found;
    }
    return std::nullopt;
  }
  for (const auto& [key, a] : lhs.nodes_) {
    auto it = rhs.nodes_.find(key);
    if (it == rhs.nodes_.end()) continue;
    const Trace::Rows& b = it->second;
    std::optional<FirstDrift> found;
    for (const auto& [pos, row_a] : a.by_position) {
      auto rb = b.by_position.find(pos);
      if (rb == b.by_position.end()) continue;
      const std::vector<std::byte>& row_b = rb->second;
      if (a.dtype != b.dtype || row_a.size() != row_b.size()) {
        if (!found) found = FirstDrift{key.first, static_cast<ChainNode>(key.second), pos, 0, a.width, 0, 0};
        continue;
      }
      const std::size_t esize = dtype_size(a.dtype);
      for (std::int64_t i = 0; i < a.width; ++i) {
        const std::size_t at = static_cast<std::size_t>(i) * esize;
        if (std::memcmp(row_a.data() + at, row_b.data() + at, esize) == 0) continue;
        if (!found)
          found = FirstDrift{key.first, static_cast<ChainNode>(key.second), pos, i, 0,
                             element_value(row_a, a.dtype, i), element_value(row_b, b.dtype, i)};
        ++found->differing;
      }
    }
    if (found) return found;
  }
  return std::nullopt;
}

}  // namespace ws1
