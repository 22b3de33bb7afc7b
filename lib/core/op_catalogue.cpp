#include <array>

#include "ws1/op_catalogue.hpp"
#include "ws1/op_list.hpp"

namespace ws1 {
namespace {

// Order: upstream's C8_REQUIRED_OPS, then the optional fused path.
constexpr std::array<OpInfo, 13> kOps{{
    {"embedding", "elementwise", true, "gather rows of W[V,H] by token ids",
     "dW: row scatter-add, FP32 accumulation, fixed order"},
    {"rms_norm", "reduction", true,
     "x*rsqrt(mean(x^2)+eps)*w, sum of squares in fixed 32-wide chunks, rounding order per contract",
     "dx, dw"},
    {"qk_norm", "reduction", true, "rms_norm over head_dim per head, all q and kv heads",
     "dx, dw"},
    {"det_gemm", "reduction", true,
     "A[M,K]@B[K,N], FP32 throughout, one rounding; declared K split (FP32 shard partials)",
     "dA, dB in FP32, one rounding"},
    {"rope", "elementwise", true, "NeoX rotate-half, pairs (i, i+D/2), per-token positions", "dx"},
    {"attention", "attention", true,
     "causal GQA softmax(QK^T/sqrt(D))V, FP32 softmax, [B,H,S,D], bottom-right causal mask",
     "dq, dk, dv (deterministic)"},
    {"silu", "elementwise", true, "x*sigmoid(x) in FP32, one rounding", "dx"},
    {"swiglu", "elementwise", true, "silu(gate)*up in FP32, one rounding", "dgate, dup"},
    {"lm_head", "reduction", true, "hidden[T,H] @ W[V,H]^T", "dhidden, dW"},
    {"logp", "logprob", true, "logits[t,y] - logsumexp(logits[t]), FP32 out", "dlogits"},
    {"batch_invariant_logp", "logprob", true,
     "per-row fixed-order logsumexp; ignore_index -100 -> 0; FP32 out", "dlogits"},
    {"pack", "elementwise", true, "x[B,S,*] + mask[B,S] -> packed active rows + cu_seqlens",
     "scatter back, zeros elsewhere"},
    {"linear_logp", "logprob", false, "logp of h @ W^T without materialising logits, FP32 out",
     "dh, dW"},
}};

// The entries are the ops of ws1/op_list.hpp, in its order.
#define WS1_OP_NAME(name) std::string_view{#name},
constexpr std::array kListed{WS1_OP_LIST(WS1_OP_NAME)};
#undef WS1_OP_NAME
constexpr bool same_names() {
  if (kListed.size() != kOps.size()) return false;
  for (std::size_t i = 0; i < kOps.size(); ++i)
    if (kOps[i].name != kListed[i]) return false;
  return true;
}
static_assert(same_names(), "kOps and WS1_OP_LIST (ws1_op_names in meson.build) must name the same ops in the same order");

}  // namespace

std::span<const OpInfo> op_catalogue() { return kOps; }

std::optional<OpInfo> find_op(std::string_view name) {
  for (const auto& op : kOps)
    if (op.name == name) return op;
  return std::nullopt;
}

}  // namespace ws1
