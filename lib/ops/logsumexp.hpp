// Internal: the vocabulary-width log-softmax of the logprob candidates (logp,
// batch_invariant_logp, linear_logp): one fixed-order logsumexp, and the selected-logp
// forward/backward that logp and batch_invariant_logp share. Their FP32 references are
// lib/ref's (log_softmax.hpp there).
//
// The candidate order (chunks, their states, the merge) is public: ws1/op_orders.hpp.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "ws1/op.hpp"
#include "ws1/op_inputs.hpp"
#include "ws1/op_orders.hpp"

namespace ws1::ops {

// bf16 storage bits -> float32 (exact: the bits are the float's upper half).
float bf16_bits_to_f32(std::uint16_t bits);

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
