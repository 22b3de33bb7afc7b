// Internal: which path is the contract's lhs and which its rhs (comparison_roles.by_report_kind.
// train_infer_logprob_parity), so d = lhs - rhs follows the contract whatever order it names them;
// and the metrics and verdict reasons every chain_parity cell shares (a chain run's, a logprob
// file's).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ws1/parity.hpp"

namespace ws1::model_detail {

struct Sides {
  std::string lhs_role, rhs_role;  // as the contract spells them
  std::vector<float> lhs, rhs;     // per active token
};

// Error (naming the contract) when a role is neither training_style_teacher_forcing nor
// inference_style_rollout_decode, or both name the same path.
Result<Sides> contract_sides(const Contract& contract, const ParityRun& run);

// The contract's gated metrics with their thresholds, then the statistics reported only
// (mean, P99, P99.9 of |d|, active and exactly-zero tokens). Error when a threshold is missing.
Status add_dlogp_metrics(const Contract& contract, const DlogpStats& s, Cell& cell);

// Error (naming the contract's field) unless the chain aggregates are computed in float32.
Status check_compute_dtype(const Contract& contract);

// Why a cell with these statistics and metrics is red: NaN/Inf (the first such token named by
// `token_at`), gated metrics over their thresholds as require_all says. Empty: green so far.
std::vector<std::string> dlogp_red_reasons(const Contract& contract, const DlogpStats& s, const Cell& cell,
                                           const std::function<std::string(std::int64_t)>& token_at);

}  // namespace ws1::model_detail
