"""logp on triton_cuda_bf16 (lib/ops/logp.cpp states the definition; cuda/ops/logp.cu is the
model): the selected log-softmax of logits rows.
  inputs   logits [..., V] bf16, targets [...] int64 (every target in [0, V), else an error)
  output   logp [...] float32 = logits[t, y] - logsumexp(logits[t]), FP32 arithmetic
  backward dy.logp [...] float32 -> dlogits [..., V] bf16 = dy * (onehot(y) - exp(x - lse))
Algorithm and order (_logprob.py): the declared chunked online logsumexp over the vocabulary:
1024-wide chunks from index 0, each chunk's max and then its in-order sum of exp(x - max)
computed sequentially by one lane (logp_chunk_kernel), the chunk states merged left to right with
one rescaling FMA per chunk (logprob_row_kernel), lse = M + log(S); the gradient recomputes
exp(x - lse) per element (logp_dlogits_kernel). No atomics and no cross-row reduction: a row's
bits depend on its logits and V only, whatever the number of rows or its position, so logp is
batch-invariant and identical run to run. Same operations in the same order as cpu_bf16 and
cuda_bf16; like cuda_bf16 it may differ from cpu_bf16 where CUDA's expf/logf and glibc's do.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _logprob as L  # noqa: E402

OP = "logp"

KERNELS = L.selected_logp_kernels(OP, honour=False)
