"""batch_invariant_logp on triton_cuda_bf16 (lib/ops/batch_invariant_logp.cpp states the
definition; cuda/ops/batch_invariant_logp.cu is the model): logp with ignore_index rows and the
declared per-row split.
  inputs   logits [..., V] bf16, targets [...] int64
  output   logp [...] float32 = logits[t, y] - logsumexp(logits[t]) in FP32; a row whose target
           is the context's ignore_index (-100 by default) gives +0; any other target outside
           [0, V) is an error
  backward dy.logp [...] float32 -> dlogits [..., V] bf16 = dy * (onehot(y) - softmax(logits));
           ignored rows get an all +0 gradient
It runs logp's kernels (_logprob.py) with ignore_index honoured. The order is fixed by the
vocabulary width alone: 1024-wide chunks from index 0, each reduced sequentially in index order by
one lane (max, then sum of exp(x - chunk max)), chunks merged left to right with one rescaling
FMA; one row never reads another row and no reduction spans rows, so a row's bits do not depend on
the number of rows, their order or padding rows (batch-invariant), and no atomics are used
(deterministic).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _logprob as L  # noqa: E402

OP = "batch_invariant_logp"

KERNELS = L.selected_logp_kernels(OP, honour=True)
