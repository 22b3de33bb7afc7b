// Internal: the vocabulary-width log-softmax of the logprob candidates (logp,
// batch_invariant_logp, linear_logp): one fixed-order logsumexp, and the selected-logp
// forward/backward that logp and batch_invariant_logp share. Their FP32 references are
// lib/ref's (log_softmax.hpp there).
//
// Candidate order (the declared split, DESIGN §4): the row is cut into kLseChunk-wide chunks
// from index 0 (the last one may be shorter). Per chunk, in index order: m = max, s = sum of
// exp(x - m) accumulated left to right in FP32. Chunks are merged left to right into a running
// (M, S): the smaller maximum's sum is rescaled by exp(smaller - larger) with one fused
// multiply-add (lse_merge). lse = M + log(S). Nothing here depends on how many rows a call
// holds, where a row sits, or the thread count, so every op built on it is batch invariant.
//
// exp and log are the C library's float functions (expf, logf); a bit-exact twin on another
// device must use the same ones.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "ws1/op.hpp"

namespace ws1::ops {

// Width of the candidates' vocabulary chunks (also linear_logp's logit chunks).
inline constexpr std::int64_t kLseChunk = 1024;

// Running state of the chunked logsumexp: maximum and sum of exp(x - max).
struct LseState {
  float max = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
};

// One chunk's state, x[0..n) in index order.
LseState lse_chunk(const float* x, std::int64_t n);
// Merges `chunk` (the next chunk to the right) into `acc`. A chunk of only -inf adds nothing.
void lse_merge(LseState& acc, const LseState& chunk);
// M + log(S).
float lse_value(const LseState& s);

// The candidate's logsumexp of x[0..n): kLseChunk-wide chunks merged left to right;
// lse_candidate() = lse_value(lse_candidate_state()).
LseState lse_candidate_state(const float* x, std::int64_t n);
float lse_candidate(const float* x, std::int64_t n);

// bf16 storage bits -> float32 (exact: the bits are the float's upper half).
float bf16_bits_to_f32(std::uint16_t bits);

// The checked inputs of logp / batch_invariant_logp, for every backend (the cpu_bf16 candidate
// and cuda_bf16 read the same ones): "logits" [..., V] bf16, "targets" [...]
// int64 (each in [0, V), or ctx.ignore_index when `honour_ignore_index`), and with `backward`
// "dy.logp" [...] float32. Throws OpInputError naming the op and the tensor.
struct LogitRows {
  const Tensor* logits = nullptr;
  const Tensor* targets = nullptr;
  const Tensor* dy = nullptr;  // backward only
  std::int64_t rows = 0, vocab = 0;
  std::vector<std::int64_t> ids;  // the targets, row-major
  std::vector<bool> ignored;      // ids[r] == ctx.ignore_index (honour_ignore_index only)
};
LogitRows check_logit_rows(std::string_view op, const Tensors& in, const OpContext& ctx,
                           bool honour_ignore_index, bool backward);

// The checked inputs of linear_logp (lib/ops/linear_logp.cpp), for every backend: "hidden"
// [..., H] bf16, "weight" [V, H] bf16, "targets" [...] int64 each in [0, V), and with `backward`
// "dy.logp" [...] float32. Throws OpInputError naming the op and the tensor.
struct LinearLogpInputs {
  Tensor hidden;                  // [rows, H] contiguous view of the input
  const Tensor* weight = nullptr;
  const Tensor* dy = nullptr;     // backward only
  Shape lead;                     // hidden's shape without H (= targets' shape)
  std::int64_t rows = 0, width = 0, vocab = 0;
  std::vector<std::int64_t> targets;
};
LinearLogpInputs check_linear_logp_inputs(std::string_view op, const Tensors& in, bool backward);

// Selected log-softmax of logits rows: inputs "logits" [..., V] bf16 and "targets" [...] int64;
// output "logp" [...] float32 (logprob outputs are FP32, spec §2.1, §9.5).
// Backward reads "dy.logp" [...] float32 and returns "dlogits" [..., V] bf16,
// dlogits = dy * (onehot(y) - exp(x - lse)).
// With `honour_ignore_index`, rows whose target equals ctx.ignore_index give logp +0 and an
// all +0 gradient row; every other target outside [0, V) is an error naming the op.
Result<Tensors> selected_logp_forward(std::string_view op, const Tensors& in,
                                      const OpContext& ctx, bool honour_ignore_index);
Result<Tensors> selected_logp_backward(std::string_view op, const Tensors& in,
                                       const OpContext& ctx, bool honour_ignore_index);

}  // namespace ws1::ops
