// Internal: which path is the contract's lhs and which its rhs (comparison_roles.by_report_kind.
// train_infer_logprob_parity), so d = lhs - rhs follows the contract whatever order it names them.
#pragma once

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

}  // namespace ws1::model_detail
