"""What the logprob ops on triton_cuda_bf16 share (logp, batch_invariant_logp, linear_logp; the
definitions and the declared order are in lib/include/ws1/op_orders.hpp, the cuda twin is
cuda/ops/logprob.cuh + logp.cu).

The row logsumexp, as declared, operation by operation:
  chunk state  the row is cut into CHUNK = 1024-wide chunks from index 0 (the last may be
               shorter); per chunk m = max over the chunk (x > m ? x : m from -inf, so a NaN is
               skipped), then s = sum of exp(x - m) in index order from 0.0; a chunk whose max
               is -inf is (-inf, 0);
  merge        chunk states folded left to right into (M, S): the smaller max's sum is rescaled
               by exp(smaller - larger) with one fused multiply-add (lse_merge);
  value        lse = M + log(S).
exp and log are libdevice's expf / logf, the accurate functions cuda_bf16 calls (tl.exp would be
the ex2.approx path); every add and subtract rounds once as written (fusion off,
_support.launch), the merge's FMA is tl.fma. Nothing depends on the number of rows or a row's
position, so the ops built on this are batch-invariant.

Kernels:
  logp_chunk_kernel    the chunk states of a logits matrix: each program takes TASKS (row, chunk)
                       pairs, one per lane, and walks its chunk sequentially in index order (max
                       pass, then sum pass), so the declared in-order sum is the real order, not a
                       tree; it also picks the row's target logit from the chunk holding it.
  logprob_row_kernel   per row, the chunk states [rows, nchunks] merged left to right: lse and
                       logp = target logit - lse (+0 and lse 0 for a row whose target is
                       ignore_index, when the op honours it).
  logp_dlogits_kernel  dlogits = bf16(dy * (onehot(y) - exp(x - lse))), rows x vocabulary blocks
                       (ignored rows all +0).
Host: selected_logp_kernels(op, honour) is the whole KERNELS of logp (honour False) and
batch_invariant_logp (honour True); linear_logp uses row_logp, lse_merge and the constants.
"""
import os
import sys

import torch

import triton
import triton.language as tl
from triton.language.extra import libdevice

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _support as S  # noqa: E402

CHUNK = 1024           # ws1::ops::kLseChunk
TASKS = 32             # (row, chunk) pairs per logp_chunk_kernel program: one per lane of one warp
ROW_BLOCK = 128        # rows per logprob_row_kernel program
GRAD_BLOCK = 1024      # vocabulary entries per logp_dlogits_kernel program
MAX_INDEX = 2**31 - 1  # the kernels index tasks and rows in int32


@triton.jit
def lse_merge(acc_max, acc_sum, next_max, next_sum):
    """Merges the chunk state (next_max, next_sum) into (acc_max, acc_sum); ws1::ops::lse_merge.
    One exp of (smaller - larger) and one FMA; a chunk of only -inf adds nothing."""
    up = next_max > acc_max
    e = libdevice.exp(tl.where(up, acc_max - next_max, next_max - acc_max))
    merged_sum = tl.where(up, tl.fma(acc_sum, e, next_sum), tl.fma(next_sum, e, acc_sum))
    take = next_max != float("-inf")
    return tl.where(take & up, next_max, acc_max), tl.where(take, merged_sum, acc_sum)


@triton.jit(do_not_specialize=["tasks"])
def logp_chunk_kernel(logits_ptr, targets_ptr, max_ptr, sum_ptr, target_logit_ptr, tasks, nchunks, V,
                      ignore_index, HONOUR_IGNORE: tl.constexpr, CHUNK: tl.constexpr, TASKS: tl.constexpr):
    task = tl.program_id(0) * TASKS + tl.arange(0, TASKS)
    live = task < tasks
    r = task // nchunks
    c0 = (task % nchunks) * CHUNK
    n = tl.minimum(V - c0, CHUNK)
    y = tl.load(targets_ptr + r, mask=live, other=0)
    if HONOUR_IGNORE:
        live = live & (y != ignore_index)
    x_ptr = logits_ptr + r.to(tl.int64) * V + c0
    m = tl.full((TASKS,), float("-inf"), tl.float32)
    for i in range(0, CHUNK):
        x = tl.load(x_ptr + i, mask=live & (i < n), other=float("-inf")).to(tl.float32)
        m = tl.where(x > m, x, m)
    s = tl.zeros((TASKS,), dtype=tl.float32)
    has = live & (m != float("-inf"))
    for i in range(0, CHUNK):
        ok = has & (i < n)
        x = tl.load(x_ptr + i, mask=ok, other=0.0).to(tl.float32)
        s = tl.where(ok, s + libdevice.exp(x - m), s)
    tl.store(max_ptr + task, m, mask=live)
    tl.store(sum_ptr + task, s, mask=live)
    mine = live & (y >= c0) & (y < c0 + n)
    t = tl.load(logits_ptr + r.to(tl.int64) * V + y, mask=mine, other=0.0).to(tl.float32)
    tl.store(target_logit_ptr + r, t, mask=mine)


@triton.jit(do_not_specialize=["rows"])
def logprob_row_kernel(max_ptr, sum_ptr, nchunks, target_logit_ptr, targets_ptr, rows, ignore_index,
                       logp_ptr, lse_ptr, HONOUR_IGNORE: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    live = r < rows
    ignored = r < 0  # all false
    if HONOUR_IGNORE:
        ignored = live & (tl.load(targets_ptr + r, mask=live, other=0) == ignore_index)
    use = live & ~ignored
    acc_max = tl.full((BLOCK,), float("-inf"), tl.float32)
    acc_sum = tl.zeros((BLOCK,), dtype=tl.float32)
    at = r.to(tl.int64) * nchunks
    for c in range(0, nchunks):
        cm = tl.load(max_ptr + at + c, mask=use, other=float("-inf"))
        cs = tl.load(sum_ptr + at + c, mask=use, other=0.0)
        acc_max, acc_sum = lse_merge(acc_max, acc_sum, cm, cs)
    lse = acc_max + libdevice.log(acc_sum)
    t = tl.load(target_logit_ptr + r, mask=use, other=0.0)
    tl.store(logp_ptr + r, tl.where(ignored, 0.0, t - lse), mask=live)
    tl.store(lse_ptr + r, tl.where(ignored, 0.0, lse), mask=live)


@triton.jit
def logp_dlogits_kernel(logits_ptr, targets_ptr, dy_ptr, lse_ptr, dlogits_ptr, V, ignore_index,
                        HONOUR_IGNORE: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    inside = cols < V
    y = tl.load(targets_ptr + r)
    d = tl.load(dy_ptr + r)
    lse = tl.load(lse_ptr + r)
    row = r.to(tl.int64) * V
    x = tl.load(logits_ptr + row + cols, mask=inside, other=0.0).to(tl.float32)
    p = libdevice.exp(x - lse)
    g = d * (tl.where(cols == y, 1.0, 0.0) - p)
    if HONOUR_IGNORE:
        g = tl.where(y == ignore_index, 0.0, g)
    tl.store(dlogits_ptr + row + cols, g.to(tl.bfloat16), mask=inside)


def row_logp(states_max, states_sum, nchunks, target_logit, targets, rows, ignore_index, honour):
    """(logp, lse) float32 [rows] from the chunk states [rows, nchunks] (logprob_row_kernel)."""
    logp = S.poisoned((rows,), torch.float32)
    lse = S.poisoned((rows,), torch.float32)
    S.launch(logprob_row_kernel, (S.cdiv(rows, ROW_BLOCK),), states_max, states_sum, nchunks, target_logit,
             targets, rows, ignore_index, logp, lse, HONOUR_IGNORE=honour, BLOCK=ROW_BLOCK, num_warps=4)
    return logp, lse


class LogitRows:
    """The checked inputs of logp / batch_invariant_logp (ws1::ops::check_logit_rows)."""

    def __init__(self, op, tensors, context, honour, backward):
        self.logits = S.bf16_input(tensors, op, "logits")
        self.targets = S.tensor_input(tensors, op, "targets", torch.int64)
        self.dy = S.tensor_input(tensors, op, "dy.logp", torch.float32) if backward else None
        S.require(self.logits.dim() >= 1, op, "logits", "needs at least one dimension (the vocabulary)")
        self.vocab = int(self.logits.shape[-1])
        S.require(self.vocab >= 1, op, "logits", "the vocabulary dimension is empty")
        lead = list(self.logits.shape[:-1])
        S.require(list(self.targets.shape) == lead, op, "targets",
                  f"shape {S.shape_string(self.targets.shape)} does not match logits "
                  f"{S.shape_string(self.logits.shape)} without its last dimension")
        self.ignore_index = int(context.get("ignore_index", -100))
        ids = self.targets.reshape(-1).tolist()
        self.rows = len(ids)
        for i, y in enumerate(ids):
            if 0 <= y < self.vocab or (honour and y == self.ignore_index):
                continue
            problem = f"target {y} at element {i} is outside [0, {self.vocab})"
            if honour:
                problem += f" and is not ignore_index {self.ignore_index}"
            S.require(False, op, "targets", problem)
        if backward:
            S.require(list(self.dy.shape) == list(self.targets.shape), op, "dy.logp",
                      f"shape {S.shape_string(self.dy.shape)} differs from targets {S.shape_string(self.targets.shape)}")
        S.require(self.rows <= MAX_INDEX and self.rows * S.cdiv(self.vocab, CHUNK) <= MAX_INDEX, op, "logits",
                  "too many rows for one triton_cuda_bf16 launch")


def _lse_pass(s, honour):
    """Device logits [rows, V], targets [rows] and (logp, lse) of every row (rows > 0)."""
    logits = S.to_device(s.logits).reshape(s.rows, s.vocab)
    targets = S.to_device(s.targets).reshape(s.rows)
    nchunks = S.cdiv(s.vocab, CHUNK)
    tasks = s.rows * nchunks
    states_max = S.poisoned((s.rows, nchunks), torch.float32)
    states_sum = S.poisoned((s.rows, nchunks), torch.float32)
    target_logit = S.poisoned((s.rows,), torch.float32)
    S.launch(logp_chunk_kernel, (S.cdiv(tasks, TASKS),), logits, targets, states_max, states_sum, target_logit,
             tasks, nchunks, s.vocab, s.ignore_index, HONOUR_IGNORE=honour, CHUNK=CHUNK, TASKS=TASKS,
             num_warps=1)
    logp, lse = row_logp(states_max, states_sum, nchunks, target_logit, targets, s.rows, s.ignore_index, honour)
    return logits, targets, logp, lse


def selected_logp_forward(op, tensors, context, honour):
    """logp [...] float32 of logp / batch_invariant_logp (they differ in `honour` only)."""
    s = LogitRows(op, tensors, context, honour, False)
    if s.rows == 0:
        return {"logp": torch.zeros(tuple(s.targets.shape), dtype=torch.float32)}
    _, _, logp, _ = _lse_pass(s, honour)
    return {"logp": S.to_host(logp.reshape(s.targets.shape))}


def selected_logp_backward(op, tensors, context, honour):
    """dlogits [..., V] bf16 = dy * (onehot(y) - softmax(logits)); ignored rows all +0."""
    s = LogitRows(op, tensors, context, honour, True)
    if s.rows == 0:
        return {"dlogits": torch.zeros(tuple(s.logits.shape), dtype=torch.bfloat16)}
    logits, targets, _, lse = _lse_pass(s, honour)
    dy = S.to_device(s.dy).reshape(s.rows)
    dlogits = S.poisoned((s.rows, s.vocab), torch.bfloat16)
    S.launch(logp_dlogits_kernel, (s.rows, S.cdiv(s.vocab, GRAD_BLOCK)), logits, targets, dy, lse, dlogits,
             s.vocab, s.ignore_index, HONOUR_IGNORE=honour, BLOCK=GRAD_BLOCK, num_warps=4)
    return {"dlogits": S.to_host(dlogits.reshape(s.logits.shape))}


FORWARD_KERNELS = [logp_chunk_kernel, logprob_row_kernel]
BACKWARD_KERNELS = [logp_chunk_kernel, logprob_row_kernel, logp_dlogits_kernel]


def selected_logp_kernels(op, honour):
    """The KERNELS entries of logp (honour False) or batch_invariant_logp (honour True): the two
    ops run the same kernels and differ only in whether ignore_index rows are honoured."""
    def forward(tensors, context):
        return selected_logp_forward(op, tensors, context, honour)

    def backward(tensors, context):
        return selected_logp_backward(op, tensors, context, honour)

    return S.kernel_entries(op, forward=(FORWARD_KERNELS, forward), backward=(BACKWARD_KERNELS, backward))
