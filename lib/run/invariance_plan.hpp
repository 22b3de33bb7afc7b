// The calls each invariance configuration makes (NOTES §d): which logical tokens sit in which
// slot of which call. Pure bookkeeping from the manifest's primary matrix; no tensors here.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ws1/invariance.hpp"
#include "ws1/manifest.hpp"
#include "ws1/op.hpp"

namespace ws1::invariance {

inline constexpr std::int64_t kPadSlot = -1;

// The logical tokens in canonical order: samples in sample_ids order, positions 0..seq_len-1
// (the invariance fixture's row order).
struct LogicalTokens {
  std::vector<std::int64_t> sample_start;  // first token index of each sample
  std::vector<std::int64_t> sample_len;
  std::vector<bool> active;                 // per token: a completion token
  std::vector<std::int64_t> active_index;   // per token: rank among active tokens, or -1
  std::int64_t count() const { return static_cast<std::int64_t>(active.size()); }
  std::int64_t active_count() const;
};
LogicalTokens logical_tokens(const Manifest& m);

// One call of the op. Query slots q (row-wise ops: the rows) and key slots kv (attention) are
// grids [batch, len] of token indices, kPadSlot where the call pads.
struct Call {
  std::int64_t batch = 1;
  std::int64_t q_len = 0, kv_len = 0;
  std::vector<std::int64_t> q, kv;
  std::int64_t rows() const { return batch * q_len; }
  friend bool operator==(const Call&, const Call&) = default;
};

struct Plan {
  std::vector<Call> calls;
  bool strided = false;  // layout: inputs handed over as non-contiguous views
  int k_ranks = 0;  // tp2 / tp4 / tp8: each call runs as that many ranks, each a contiguous K shard
  friend bool operator==(const Plan&, const Plan&) = default;
};

// The canonical configuration (nullopt) or a transform, for an op of `layout`.
Plan make_plan(const Manifest& m, const LogicalTokens& tokens, std::optional<Transform> t,
               TokenLayout layout);

}  // namespace ws1::invariance
