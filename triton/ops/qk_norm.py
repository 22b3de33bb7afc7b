"""qk_norm on triton_cuda_bf16 (lib/ops/qk_norm.cpp states the definition): RMSNorm over
head_dim for every head of every token, x [..., head_dim] (fixture [T, Hq, D]) and weight
[head_dim], and its backward.

It is rms_norm's kernels (rms_norm.py, where the algorithm, the 32-wide chunk order, the
contract's rounding order and the determinism argument are stated) on rows of head_dim: each
head's row is normalised on its own by one lane, so a row's result does not depend on how many
tokens or heads are in the call or where the row sits; dweight sums over all rows
(tokens x heads) in row index order, one lane per column, no atomics.

What qk_norm adds, as cuda_bf16 does: when the run knows head_dim (context head_dim > 0), x's
last dimension must equal it, so a flattened [T, Hq*D] input is refused rather than normalised
over the whole hidden width.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _support as S  # noqa: E402
import rms_norm as R  # noqa: E402

OP = "qk_norm"


def check_head_dim(tensors, context):
    x = S.bf16_input(tensors, OP, "x")
    S.require(x.dim() >= 1, OP, "x", "needs at least one dimension (head_dim)")
    head_dim = int(context.get("head_dim", 0) or 0)
    S.require(head_dim <= 0 or int(x.shape[-1]) == head_dim, OP, "x",
              f"shape {S.shape_string(x.shape)}: last dimension is not head_dim {head_dim}")


def forward(tensors, context):
    check_head_dim(tensors, context)
    return R.forward_of(OP, tensors, context)


def backward(tensors, context):
    check_head_dim(tensors, context)
    return R.backward_of(OP, tensors, context)


KERNELS = S.kernel_entries(OP, forward=(R.FORWARD_KERNELS, forward), backward=(R.BACKWARD_KERNELS, backward))
