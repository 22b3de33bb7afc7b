// batch_invariant_logp, eager bf16: logp's graph (lib/naive/logp.cpp) on the rows whose target is
// not ctx.ignore_index (lib/ref/batch_invariant_logp.cpp):
//   forward:  logp = zeros(T); logp[active] = F.log_softmax(logits[active], -1)
//                                              .gather(-1, targets[active]).float()
//   backward: dlogits[active] = bf(g - exp(out) * g.sum(-1)), g = scatter of bf(dy.logp[active]);
//             ignored rows +0 (outside the graph; their dy is not read)
// Eager reduces each row on its own, so this is batch invariant too.
#include "log_softmax.hpp"

namespace ws1::naive {

Tensors batch_invariant_logp_forward(const Call& call) { return logit_logp_forward(call, true); }

Tensors batch_invariant_logp_backward(const Call& call) { return logit_logp_backward(call, true); }

}  // namespace ws1::naive
