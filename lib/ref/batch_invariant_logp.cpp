// batch_invariant_logp's FP32 reference: logp's definition (lib/ref/logp.cpp) with ignored rows.
//   logits [..., V] bf16, targets [...] int64 (each in [0, V) or ctx.ignore_index)
//   logp [...] = logits[t, y] - logsumexp(logits[t]) in FP32; +0 where y == ignore_index
//   backward: dlogits [..., V] = dy * (onehot(y) - softmax(logits[t])); an all +0 row where
//   y == ignore_index (its dy is not read)
// Batch invariance is the candidate's property; the reference reduces each row on its own, so
// it has it too, but nothing here depends on that.
#include "log_softmax.hpp"

namespace ws1::ref {

Tensors batch_invariant_logp_forward(const Call& call) { return selected_logp_forward(call, true); }

Tensors batch_invariant_logp_backward(const Call& call) { return selected_logp_backward(call, true); }

}  // namespace ws1::ref
