"""embedding on triton_cuda_bf16 (lib/ops/embedding.cpp states the definition):
y[..., :] = table[ids[...], :]; ids int64 of any shape, table [V, H] bf16. Every id is checked
on the host to lie in [0, V) before anything runs.

Forward: embedding_gather_kernel, grid (token, column tile): a bit copy of the selected row
(the tensors are viewed as int16, so no value is ever converted). Exact.

Backward: dtable [V, H] bf16; row v = the FP32 sum of the dy rows of the tokens with id v,
added left to right in increasing token index from +0 and rounded to bf16 once; +0 in rows no
id selects. That is the cpu_bf16 and cuda_bf16 order exactly. Three steps:
  1. torch.sort(ids, stable=True) on the GPU, used for the permutation only: equal ids keep
     increasing token order (the CPU's std::stable_sort, cuda's stable radix sort).
  2. embedding_runs_kernel: for each sorted position p, if p starts its id's run it writes
     run_first[id] = p, if it ends it, run_last[id] = p + 1 (int32 arrays of V, +0 for ids
     that do not occur: an empty run). Each entry has exactly one writer.
  3. embedding_dtable_kernel, grid (id, column tile): sums its id's run of dy rows in sorted
     order into an FP32 accumulator and writes the whole tile, zeros included; every dtable
     element is written by exactly one lane, so there is no separate zero fill.
No atomics anywhere: each output element is one lane's fixed sequence of additions, so the
bits do not depend on the grid or on timing, and a call with the same tokens in the same order
gives the same bits. (Regrouping the tokens over calls changes the association of a parameter
gradient's sum; D13 judges dtable bit for bit only where the tokens and their order are kept.)
"""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _support as S  # noqa: E402

OP = "embedding"
BLOCK_H = 1024   # columns per program of the row kernels
RUNS_BLOCK = 1024  # sorted positions per program of embedding_runs_kernel


@triton.jit
def embedding_gather_kernel(table_ptr, ids_ptr, y_ptr, hidden, BLOCK_H: tl.constexpr):
    t = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    m = cols < hidden
    row = tl.load(ids_ptr + t)
    v = tl.load(table_ptr + row * hidden + cols, mask=m)
    tl.store(y_ptr + t * hidden + cols, v, mask=m)


@triton.jit
def embedding_runs_kernel(sorted_ids_ptr, first_ptr, last_ptr, n, RUNS_BLOCK: tl.constexpr):
    p = tl.program_id(0) * RUNS_BLOCK + tl.arange(0, RUNS_BLOCK)
    m = p < n
    ids = tl.load(sorted_ids_ptr + p, mask=m, other=-1)
    prev = tl.load(sorted_ids_ptr + p - 1, mask=m & (p > 0), other=-1)
    nxt = tl.load(sorted_ids_ptr + p + 1, mask=(p + 1) < n, other=-1)
    tl.store(first_ptr + ids, p, mask=m & (ids != prev))
    tl.store(last_ptr + ids, p + 1, mask=m & (ids != nxt))


@triton.jit
def embedding_dtable_kernel(dy_ptr, tokens_ptr, first_ptr, last_ptr, dtable_ptr, hidden,
                            BLOCK_H: tl.constexpr):
    v = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    m = cols < hidden
    first = tl.load(first_ptr + v)
    last = tl.load(last_ptr + v)
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for k in range(first, last):
        tok = tl.load(tokens_ptr + k)
        acc = acc + tl.load(dy_ptr + tok * hidden + cols, mask=m, other=0.0).to(tl.float32)
    tl.store(dtable_ptr + v * hidden + cols, acc.to(tl.bfloat16), mask=m)


class EmbeddingInputs:
    """A checked call, as lib/ops' embedding_inputs."""

    def __init__(self, tensors, backward):
        self.ids = S.tensor_input(tensors, OP, "ids", torch.int64)
        self.table = S.bf16_input(tensors, OP, "table", 2)
        self.vocab, self.hidden = int(self.table.shape[0]), int(self.table.shape[1])
        flat = self.ids.reshape(-1)
        bad = torch.nonzero((flat < 0) | (flat >= self.vocab))
        if bad.numel() > 0:
            k = int(bad[0, 0])
            raise S.OpInputError(f"{OP}: ids: element {k} = {int(flat[k])} is outside [0, {self.vocab}) (table rows)")
        self.out_shape = list(self.ids.shape) + [self.hidden]
        self.dy = None
        if backward:
            self.dy = S.bf16_input(tensors, OP, "dy.y")
            S.require(list(self.dy.shape) == self.out_shape, OP, "dy.y",
                      f"shape {S.shape_string(self.dy.shape)} (expected {S.shape_string(self.out_shape)})")
        self.tokens = flat.numel()


def forward(tensors, context):
    g = EmbeddingInputs(tensors, False)
    table = S.to_device(g.table).view(torch.int16)
    ids = S.to_device(g.ids.reshape(-1))
    y = S.poisoned(g.out_shape, torch.bfloat16)
    if g.tokens > 0 and g.hidden > 0:
        S.launch(embedding_gather_kernel, (g.tokens, S.cdiv(g.hidden, BLOCK_H)), table, ids,
                 y.view(torch.int16), g.hidden, BLOCK_H=BLOCK_H)
    return {"y": S.to_host(y)}


def backward(tensors, context):
    g = EmbeddingInputs(tensors, True)
    S.require(g.tokens < 2**31 - 1, OP, "ids", f"{g.tokens} tokens (at most 2^31 - 2 supported)")
    dtable = S.poisoned([g.vocab, g.hidden], torch.bfloat16)
    if g.vocab == 0 or g.hidden == 0:
        return {"dtable": S.to_host(dtable)}
    dy = S.to_device(g.dy)
    ids = S.to_device(g.ids.reshape(-1))
    first = torch.zeros(g.vocab, dtype=torch.int32, device=S.DEVICE)
    last = torch.zeros(g.vocab, dtype=torch.int32, device=S.DEVICE)
    if g.tokens > 0:
        sorted_ids, tokens = torch.sort(ids, stable=True)  # the permutation only
        S.launch(embedding_runs_kernel, (S.cdiv(g.tokens, RUNS_BLOCK),), sorted_ids, first, last, g.tokens,
                 RUNS_BLOCK=RUNS_BLOCK)
    else:
        tokens = torch.zeros(1, dtype=torch.int64, device=S.DEVICE)  # never read: every run is empty
    S.launch(embedding_dtable_kernel, (g.vocab, S.cdiv(g.hidden, BLOCK_H)), S.pointer_arg(dy), tokens, first, last,
             dtable, g.hidden, BLOCK_H=BLOCK_H)
    return {"dtable": S.to_host(dtable)}


KERNELS = S.kernel_entries(
    OP, forward=([embedding_gather_kernel], forward),
    backward=(["torch.sort", embedding_runs_kernel, embedding_dtable_kernel], backward))
