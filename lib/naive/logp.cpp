// logp, eager bf16 (lib/ref/logp.cpp defines the inputs and the FP32 math):
//   forward:  out = F.log_softmax(logits, -1)  (bf16: FP32 inside, one rounding per element)
//             logp = out.gather(-1, targets).float()   (exact)
//   backward: g_sel = bf(dy.logp); g = zeros.scatter(targets, g_sel);
//             dlogits = bf(g - exp(out) * g.sum(-1))   (log_softmax's backward node)
// The graph and its checks are log_softmax.hpp's, shared with batch_invariant_logp.
#include "log_softmax.hpp"

namespace ws1::naive {

Tensors logp_forward(const Call& call) { return logit_logp_forward(call, false); }

Tensors logp_backward(const Call& call) { return logit_logp_backward(call, false); }

}  // namespace ws1::naive
