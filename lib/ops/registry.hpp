// Internal: one accessor per op implementation (each defined in lib/ops/<op>.cpp).
#pragma once

#include "ws1/op.hpp"

namespace ws1::ops {

// ---- one line per implemented op (keep catalogue order) ----
const Op& embedding_op();
const Op& rms_norm_op();
const Op& qk_norm_op();
const Op& det_gemm_op();
const Op& rope_op();
const Op& attention_op();
const Op& silu_op();
const Op& swiglu_op();
const Op& lm_head_op();
const Op& logp_op();
const Op& batch_invariant_logp_op();
const Op& pack_op();
const Op& linear_logp_op();
// ---- end of op list ----

}  // namespace ws1::ops
