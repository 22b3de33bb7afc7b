// One op of the catalogue (DESIGN §6): its spec and its cpu_bf16 candidate, in
// lib/ops/<name>.cpp; its FP32 reference (spec §3.1) is lib/ref/<name>.cpp's.
//
// Tensors travel by name. Forward inputs are the fixture's tensors (bf16 activations and
// weights, int64 ids). Backward additionally reads the upstream gradient of each output as
// "dy.<output>" and returns the gradient of each differentiable input as "d<input>".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ws1/contract.hpp"
#include "ws1/dtype.hpp"
#include "ws1/error.hpp"
#include "ws1/op_catalogue.hpp"
#include "ws1/tensor.hpp"

namespace ws1 {

using Tensors = std::vector<NamedTensor>;

// The tensor called `name`, or nullptr.
const Tensor* find_tensor(std::span<const NamedTensor> tensors, std::string_view name);

// Settings an op reads besides its tensors: model constants from the manifest and the
// contract's declarations (DESIGN §3). Built once per run by make_op_context().
struct OpContext {
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e6;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_key_value_heads = 0;
  std::int64_t head_dim = 0;
  RmsNormOrder rms_norm_order = RmsNormOrder::kKernel;  // contract: rms_norm_rounding
  // det_gemm's declared K split (contract: ws1check_declarations.det_gemm_k_split.shards;
  // DESIGN §3.1 Option A): the forward cuts K into k_shards contiguous shards
  // [r*K/t, (r+1)*K/t) (integer division), sums each shard's products in FP32 from zero,
  // adds the shard partials in FP32 in shard order (p0 + p1, then + p2, ...) and rounds to
  // bf16 once. 1: no split (one FP32 sum over K).
  std::int64_t k_shards = 1;
  // Set by the tp transforms on a rank's call: det_gemm's forward returns c as the FP32
  // partial of the K it is given (one shard: no further split, no rounding; dtype float32),
  // what a tensor-parallel rank contributes to the all-reduce.
  bool k_partial = false;
  std::int64_t ignore_index = -100;                     // batch_invariant_logp
  unsigned threads = 0;                                 // 0: hardware concurrency
};

// An output (or gradient) the op produces and the dtype the candidate must give it.
// References always produce float32 (spec §3.1, condition 4).
struct TensorDecl {
  std::string name;
  DType candidate_dtype = DType::kBF16;
};

// How the invariance runner lays an op's token tensors out (lib/run/invariance_layout.cpp).
enum class TokenLayout {
  // Every token tensor has one token per row of its first dimension (the fixture's
  // token-major layout); a call gets the rows of its tokens, pad rows where a grid pads.
  kRows,
  // Attention: q, dy.o, o, dq are [B, H, Sq, D] over query slots; k, v, dk, dv are
  // [B, Hkv, Skv, D] over key slots; the runner adds key_mask [B, Skv] (false on pads).
  kAttentionGrid,
};

// A GEMM whose K can be split over two tensor-parallel ranks: lhs [M, K] along dim 1, rhs
// [K, N] along dim 0; each rank's output is a partial sum of `out`, and the ranks' outputs
// are summed in FP32 and rounded once (a bf16 all-reduce, rank order).
struct KSplit {
  std::string lhs, rhs, out;
};

// The arithmetic of one call, for `ws1check bench`'s roofline (docs/performance.md): the matrix
// products it contains (2mnk FLOPs each; the bench times cuBLAS on the same shapes for the
// ratio) and any further FLOPs the op counts (attention's causal score and value products).
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
};
struct OpWork {
  std::vector<GemmShape> gemms;
  double other_flops = 0.0;
  // The fewest bytes a call must move through device memory; 0: every input read once and
  // every output written once (ops that read a tensor sparsely, like embedding's table, say).
  double bytes = 0.0;
  // The products the op's algorithm performs where they are more than `gemms` (linear_logp's
  // backward recomputes the logits and sends G as bf16 hi + lo: docs/decisions.md D30); the
  // bench times cuBLAS on these too, for a second ratio. Empty: the same as gemms.
  std::vector<GemmShape> algorithm_gemms;
  double flops() const {
    double f = other_flops;
    for (const auto& g : gemms) f += 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
    return f;
  }
};

class Op {
 public:
  virtual ~Op() = default;

  const OpInfo& info() const { return info_; }
  std::string_view name() const { return info_.name; }

  // Forward outputs, e.g. {"y", bf16}; logprob outputs are float32 (spec §2.1).
  virtual std::vector<TensorDecl> outputs() const = 0;
  // Gradients backward returns, e.g. {"dx", bf16}, {"dweight", bf16}. Empty: no backward.
  virtual std::vector<TensorDecl> gradients() const = 0;
  virtual TokenLayout token_layout() const { return TokenLayout::kRows; }
  virtual std::optional<KSplit> k_split() const { return std::nullopt; }
  // Matrix work of a call on `in` (forward, or backward when `backward`); {} for ops that are
  // bandwidth-bound by nature. Shapes are read from `in`, which the op has not validated yet:
  // return {} for tensors it would refuse.
  virtual OpWork work(const Tensors& in, bool backward) const {
    (void)in;
    (void)backward;
    return {};
  }

  // FP32 reference (spec §3.1): ws1::ref's for this op (ws1/ref.hpp, lib/ref/<op>.cpp),
  // written from the definition and sharing no code with the candidate below.
  Result<Tensors> reference_forward(const Tensors& in, const OpContext& ctx) const;
  Result<Tensors> reference_backward(const Tensors& in, const OpContext& ctx) const;

  // cpu_bf16 candidate: bf16 in/out, FP32 accumulation, fixed reduction order, deterministic.
  virtual Result<Tensors> cpu_forward(const Tensors& in, const OpContext& ctx) const = 0;
  virtual Result<Tensors> cpu_backward(const Tensors& in, const OpContext& ctx) const = 0;

 protected:
  explicit Op(const OpInfo& info) : info_(info) {}

 private:
  OpInfo info_;
};

// The registry: every op of the catalogue that has an implementation, in catalogue order.
std::span<const Op* const> all_ops();
const Op* find_op_impl(std::string_view name);

}  // namespace ws1
