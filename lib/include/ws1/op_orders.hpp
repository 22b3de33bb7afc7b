// The candidates' declared orders: the reduction orders that cpu_bf16 (lib/ops) and cuda_bf16
// (cuda/ops) both follow, bit for bit, and that the contract and the audit name. A kernel that
// claims one of them takes its constants and rules from here. Also compiled by nvcc.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

#include "ws1/op.hpp"

namespace ws1::ops {

// ---- the vocabulary logsumexp of logp, batch_invariant_logp and linear_logp (DESIGN §4) ----
// The row is cut into kLseChunk-wide chunks from index 0 (the last one may be shorter). Per
// chunk, in index order: m = max, s = sum of exp(x - m) accumulated left to right in FP32.
// Chunks are merged left to right into a running (M, S): the smaller maximum's sum is rescaled
// by exp(smaller - larger) with one fused multiply-add (lse_merge). lse = M + log(S). exp and log
// are the C library's float functions (expf, logf); a bit-exact twin on another device must use
// the same ones. Nothing depends on how many rows a call holds, where a row sits, or the thread
// count, so every op built on it is batch invariant.

// Width of the vocabulary chunks (also linear_logp's logit chunks).
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
// The logsumexp of x[0..n): kLseChunk-wide chunks merged left to right;
// lse_candidate() = lse_value(lse_candidate_state()).
LseState lse_candidate_state(const float* x, std::int64_t n);
float lse_candidate(const float* x, std::int64_t n);

// ---- rms_norm / qk_norm dweight (docs/decisions.md D24) ----
// Rows are cut into fixed blocks of kDwRowBlock rows from row 0 (the last one may be shorter).
// Per column, each block's partial is acc = fma(float(dy*x), rstd, acc) over its rows left to
// right from +0; the partials are then added in block order, s = 0, s = s + p_0, s = s + p_1,
// ... in FP32, and s is rounded to bf16 once. The result is a function of the rows alone. 256:
// at qk_norm's 262144 rows (8192 tokens x 32 heads, 128 columns) that is 1024 blocks, so the GPU
// sums 128 x 1024 chains of 256 instead of 128 chains of 262144 (rms_norm at 8192 tokens:
// 4096 x 32); the partials take 1/128 of the bytes of x, and the merge is 1024 adds per column.
inline constexpr std::int64_t kDwRowBlock = 256;

// ---- det_gemm's K split (contract det_gemm_k_split) ----
// The number of K shards the forward sums separately: 1 on a tensor-parallel rank's call
// (ctx.k_partial), else ctx.k_shards (which must be >= 1; an OpInputError naming `op` if not).
std::int64_t det_gemm_shards(std::string_view op, const OpContext& ctx);

}  // namespace ws1::ops
