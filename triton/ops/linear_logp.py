"""linear_logp on triton_cuda_bf16 (lib/ops/linear_logp.cpp states the definition;
cuda/ops/linear_logp.cu is the model): logp[t] = logits[t, y] - logsumexp(logits[t]) with
logits = hidden @ weight^T, FLOAT32 out, without the [T, V] logits in memory; backward
dhidden = G @ W and dweight = G^T @ hidden (bf16) with G = dy * (onehot(y) - softmax(logits)).
  inputs   hidden [..., H] bf16, weight [V, H] bf16, targets [...] int64 (each in [0, V)),
           backward also dy.logp [...] float32

Logits tiles (128 x 128) are _gemm.dot_tile products of the bf16 inputs: tl.dot with
input_precision="ieee" on the tensor cores, FP32 accumulator, k in increasing 64-wide slices over
H (promoted every 512 k above H = 4096); a logit's bits depend on its row of hidden and its row of
weight only, so every kernel that recomputes a tile gets the same logits. Kernels, in order:
  linear_logp_state_kernel  grid (rows / 128, V / 1024): one program per 128 rows x one 1024-wide
                            vocabulary chunk (the declared split), its 8 tiles of 128 columns in
                            increasing order; per tile and row the max (exact in any order) and
                            the sum of exp(x - max) (tl.sum over the tile's 128 columns, a fixed
                            reduction tree of the compiled kernel), merged into the row's running
                            state with _logprob.lse_merge; one (max, sum) per (row, chunk). The
                            program whose tile holds a row's target writes that logit.
  logprob_row_kernel        (_logprob) the chunk states of a row merged left to right: lse,
                            logp = target logit - lse.
Backward, after the same two kernels (lse of every row), per vocabulary slab [v0, v0 + S) (S a
multiple of 1024, sized so the G scratch stays near 2^26 elements):
  linear_logp_grad_kernel     recomputes the slab's logits tiles; G = dy * (onehot - exp(x - lse))
                              in FP32, stored as two bf16 [T, S] scratches G_hi = bf16(G) and
                              G_lo = bf16(G - G_hi) (exact difference): the tensor cores take bf16,
                              and hi + lo keeps ~16 bits of G for dhidden.
  linear_logp_dhidden_kernel  dhidden[T, H] = sum over the vocabulary of (G_hi + G_lo) @ W: per
                              1024-wide vocabulary chunk (from index 0) a tensor-core sum (each
                              64-wide k step adds the hi products, then the lo ones) from zero,
                              the chunk partials added left to right into an FP32 total with
                              round-to-nearest adds (the CPU candidate's chunking); the total of
                              the earlier slabs is carried in an FP32 buffer (an exact round
                              trip), so a row's bits do not depend on S (which depends on T);
                              the last slab rounds once to bf16.
  mma_gemm_kernel (_gemm)     dweight[slab, H] = (G_hi + G_lo)_slab^T @ hidden, as one product over
                              K = 2T: G_hi and G_lo are the two halves of one [2T, S] scratch and
                              hidden is stacked twice, so each element sums G_hi's tokens in
                              increasing order, then G_lo's, on the tensor cores (promoted every
                              512 tokens above 4096), rounded once. G_hi alone (bf16 G) was red on
                              the smoke-gqa workload's scaled_logit dweight (2 of 16384 elements
                              at 1.06x atol), as it had been on cuda_bf16.
No atomics, no split-K, constant tile shapes: identical bits run to run; logp and dhidden rows
depend on their own row only (batch-invariant); dweight sums over the call's tokens by definition.
Not bit-equal to cpu_bf16: the tensor cores' k16 sums differ from the CPU's 32-wide FMA chains,
the in-chunk lse runs in the tile order above, and G enters the products as bf16.
"""
import os
import sys

import torch

import triton
import triton.language as tl
from triton.language.extra import libdevice

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _gemm as G  # noqa: E402
import _logprob as L  # noqa: E402
import _support as S  # noqa: E402
from _gemm import dot_tile  # noqa: E402
from _logprob import lse_merge  # noqa: E402

OP = "linear_logp"
CHUNK = L.CHUNK                 # the declared vocabulary split (1024)
GRAD_BUDGET = 1 << 26           # G scratch elements per slab (about)
MAX_GRID_Y = 65535
MAX_SLAB = MAX_GRID_Y * G.BN // CHUNK * CHUNK
assert CHUNK % G.BN == 0 and CHUNK % G.BK == 0


@triton.jit(do_not_specialize=["rows"])
def linear_logp_state_kernel(h_ptr, w_ptr, targets_ptr, max_ptr, sum_ptr, target_logit_ptr, rows, V, H, nchunks,
                             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SLAB: tl.constexpr,
                             PROMOTE: tl.constexpr, CHUNK: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    chunk = tl.program_id(1)
    in_m = offs_m < rows
    y = tl.load(targets_ptr + offs_m, mask=in_m, other=-1)
    run_max = tl.full((BM,), float("-inf"), tl.float32)
    run_sum = tl.zeros((BM,), dtype=tl.float32)
    for t in range(0, CHUNK // BN):
        n0 = chunk * CHUNK + t * BN
        offs_n = n0 + tl.arange(0, BN)
        # logits[m, v] = sum over h of hidden[m, h] * W[v, h]: A = hidden [rows][H], B = W^T.
        logits = dot_tile(h_ptr, w_ptr, offs_m, offs_n, rows, V, H, H, 1, 1, H, BM, BN, BK, SLAB, PROMOTE)
        valid = (offs_n < V)[None, :]
        x = tl.where(valid, logits, float("-inf"))
        tile_max = tl.max(x, axis=1)
        e = tl.where(valid & (tile_max != float("-inf"))[:, None], libdevice.exp(x - tile_max[:, None]), 0.0)
        run_max, run_sum = lse_merge(run_max, run_sum, tile_max, tl.sum(e, axis=1))
        # The target logit: one tile of one program holds it (a sum of one value and zeros).
        hit = offs_n[None, :] == y[:, None]
        target = tl.sum(tl.where(hit, logits, 0.0), axis=1)
        tl.store(target_logit_ptr + offs_m, target, mask=in_m & (y >= n0) & (y < n0 + BN))
    at = offs_m.to(tl.int64) * nchunks + chunk
    tl.store(max_ptr + at, run_max, mask=in_m)
    tl.store(sum_ptr + at, run_sum, mask=in_m)


@triton.jit(do_not_specialize=["rows"])
def linear_logp_grad_kernel(h_ptr, w_ptr, targets_ptr, dy_ptr, lse_ptr, g_hi_ptr, g_lo_ptr, ldg, rows, V, H,
                            v0, v_end, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SLAB: tl.constexpr,
                            PROMOTE: tl.constexpr):
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = v0 + tl.program_id(1) * BN + tl.arange(0, BN)
    in_m = offs_m < rows
    logits = dot_tile(h_ptr, w_ptr, offs_m, offs_n, rows, V, H, H, 1, 1, H, BM, BN, BK, SLAB, PROMOTE)
    y = tl.load(targets_ptr + offs_m, mask=in_m, other=-1)
    d = tl.load(dy_ptr + offs_m, mask=in_m, other=0.0)
    lse = tl.load(lse_ptr + offs_m, mask=in_m, other=0.0)
    p = libdevice.exp(logits - lse[:, None])
    g = d[:, None] * (tl.where(offs_n[None, :] == y[:, None], 1.0, 0.0) - p)
    hi = g.to(tl.bfloat16)
    lo = (g - hi.to(tl.float32)).to(tl.bfloat16)  # the difference is exact in FP32
    at = offs_m.to(tl.int64)[:, None] * ldg + (offs_n - v0)[None, :]
    keep = in_m[:, None] & (offs_n < v_end)[None, :]
    tl.store(g_hi_ptr + at, hi, mask=keep)
    tl.store(g_lo_ptr + at, lo, mask=keep)


@triton.jit(do_not_specialize=["rows"])
def linear_logp_dhidden_kernel(g_hi_ptr, g_lo_ptr, ldg, w_ptr, partial_ptr, dhidden_ptr, rows, H, n,
                               FIRST: tl.constexpr, LAST: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                               BK: tl.constexpr, CHUNK: tl.constexpr):
    # dhidden[m, h] (+)= sum over the slab's i < n of (G_hi + G_lo)[m, i] * W_slab[i, h].
    offs_m = tl.program_id(0) * BM + tl.arange(0, BM)
    offs_n = tl.program_id(1) * BN + tl.arange(0, BN)
    in_m = (offs_m < rows)[:, None]
    in_n = (offs_n < H)[None, :]
    hi_rows = g_hi_ptr + offs_m.to(tl.int64)[:, None] * ldg
    lo_rows = g_lo_ptr + offs_m.to(tl.int64)[:, None] * ldg
    w_cols = w_ptr + offs_n[None, :]
    out = offs_m.to(tl.int64)[:, None] * H + offs_n[None, :]
    if FIRST:
        total = tl.zeros((BM, BN), dtype=tl.float32)
    else:
        total = tl.load(partial_ptr + out, mask=in_m & in_n, other=0.0)
    for c0 in range(0, n, CHUNK):
        part = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(c0, tl.minimum(c0 + CHUNK, n), BK):
            ks = k0 + tl.arange(0, BK)
            in_k = ks < n
            a_hi = tl.load(hi_rows + ks[None, :], mask=in_m & in_k[None, :], other=0.0)
            a_lo = tl.load(lo_rows + ks[None, :], mask=in_m & in_k[None, :], other=0.0)
            b = tl.load(w_cols + ks.to(tl.int64)[:, None] * H, mask=in_k[:, None] & in_n, other=0.0)
            part = tl.dot(a_hi, b, acc=part, input_precision="ieee")
            part = tl.dot(a_lo, b, acc=part, input_precision="ieee")
        total = total + part  # the chunk partials, left to right, round to nearest
    if LAST:
        tl.store(dhidden_ptr + out, total.to(tl.bfloat16), mask=in_m & in_n)
    else:
        tl.store(partial_ptr + out, total, mask=in_m & in_n)


class Inputs:
    """The checked inputs (ws1::ops::check_linear_logp_inputs), in its order."""

    def __init__(self, tensors, backward):
        h = S.bf16_input(tensors, OP, "hidden")
        self.weight = S.bf16_input(tensors, OP, "weight", 2)
        self.targets = S.tensor_input(tensors, OP, "targets", torch.int64)
        S.require(h.dim() >= 1, OP, "hidden", "needs at least one dimension")
        self.width = int(h.shape[-1])
        S.require(self.weight.shape[1] == self.width, OP, "weight",
                  f"shape {S.shape_string(self.weight.shape)} does not fit hidden {S.shape_string(h.shape)} "
                  f"(needs [V, {self.width}])")
        self.vocab = int(self.weight.shape[0])
        S.require(self.vocab >= 1, OP, "weight", "the vocabulary dimension is empty")
        self.lead = list(h.shape[:-1])
        S.require(list(self.targets.shape) == self.lead, OP, "targets",
                  f"shape {S.shape_string(self.targets.shape)} does not match hidden {S.shape_string(h.shape)} "
                  "without its last dimension")
        ids = self.targets.reshape(-1).tolist()
        self.rows = len(ids)
        for i, y in enumerate(ids):
            if not 0 <= y < self.vocab:
                S.require(False, OP, "targets", f"target {y} at element {i} is outside [0, {self.vocab})")
        self.hidden = h
        self.dy = None
        if backward:
            self.dy = S.tensor_input(tensors, OP, "dy.logp", torch.float32)
            S.require(list(self.dy.shape) == self.lead, OP, "dy.logp",
                      f"shape {S.shape_string(self.dy.shape)} differs from targets {S.shape_string(self.lead)}")
        S.require(S.cdiv(self.vocab, CHUNK) <= MAX_GRID_Y, OP, "weight",
                  "vocabulary too wide for a triton_cuda_bf16 launch")
        S.require(self.rows <= L.MAX_INDEX, OP, "hidden", "too many rows for a triton_cuda_bf16 launch")


def _tile_meta(width):
    return dict(BM=G.BM, BN=G.BN, BK=G.BK, SLAB=G.SLAB, PROMOTE=G.promote(width))


def _row_stats(x, hidden, weight, targets):
    """(logp, lse) float32 [rows] (rows > 0)."""
    nchunks = S.cdiv(x.vocab, CHUNK)
    states_max = S.poisoned((x.rows, nchunks), torch.float32)
    states_sum = S.poisoned((x.rows, nchunks), torch.float32)
    target_logit = S.poisoned((x.rows,), torch.float32)
    S.launch(linear_logp_state_kernel, (S.cdiv(x.rows, G.BM), nchunks), S.pointer_arg(hidden), weight, targets,
             states_max, states_sum, target_logit, x.rows, x.vocab, x.width, nchunks, CHUNK=CHUNK,
             num_warps=G.NUM_WARPS, num_stages=G.NUM_STAGES, **_tile_meta(x.width))
    return L.row_logp(states_max, states_sum, nchunks, target_logit, targets, x.rows, 0, False)


def _upload(x):
    hidden = S.to_device(x.hidden).reshape(x.rows, x.width)
    weight = S.to_device(x.weight)
    targets = S.to_device(x.targets).reshape(x.rows)
    return hidden, weight, targets


def forward(tensors, context):
    x = Inputs(tensors, False)
    if x.rows == 0:
        return {"logp": torch.zeros(tuple(x.lead), dtype=torch.float32)}
    hidden, weight, targets = _upload(x)
    logp, _ = _row_stats(x, hidden, weight, targets)
    return {"logp": S.to_host(logp.reshape(x.lead))}


def slab_width(rows, vocab):
    """Vocabulary columns per backward slab: a multiple of CHUNK, G near GRAD_BUDGET elements."""
    whole = S.cdiv(vocab, CHUNK) * CHUNK
    s = max(GRAD_BUDGET // rows // CHUNK * CHUNK, CHUNK)
    return min(s, whole, MAX_SLAB)


def backward(tensors, context):
    x = Inputs(tensors, True)
    dh_shape = tuple(x.lead) + (x.width,)
    if x.rows == 0 or x.width == 0:  # empty gradients (a sum over no rows is zero)
        return {"dhidden": torch.zeros(dh_shape, dtype=torch.bfloat16),
                "dweight": torch.zeros(tuple(x.weight.shape), dtype=torch.bfloat16)}
    hidden, weight, targets = _upload(x)
    dy = S.to_device(x.dy).reshape(x.rows)
    _, lse = _row_stats(x, hidden, weight, targets)
    dhidden = S.poisoned((x.rows, x.width), torch.bfloat16)
    dweight = S.poisoned((x.vocab, x.width), torch.bfloat16)
    slab = slab_width(x.rows, x.vocab)
    g = torch.empty((2 * x.rows, slab), dtype=torch.bfloat16, device=S.DEVICE)  # G_hi's rows, then G_lo's
    g_hi, g_lo = g[:x.rows], g[x.rows:]
    hidden2 = torch.cat((hidden, hidden))  # dweight's K: G_hi's tokens, then G_lo's
    partial = torch.empty((x.rows, x.width) if slab < x.vocab else (1,), dtype=torch.float32, device=S.DEVICE)
    for v0 in range(0, x.vocab, slab):
        v_end = min(v0 + slab, x.vocab)
        n = v_end - v0
        S.launch(linear_logp_grad_kernel, (S.cdiv(x.rows, G.BM), S.cdiv(n, G.BN)), hidden, weight, targets, dy,
                 lse, g_hi, g_lo, slab, x.rows, x.vocab, x.width, v0, v_end,
                 num_warps=G.NUM_WARPS, num_stages=G.NUM_STAGES, **_tile_meta(x.width))
        S.launch(linear_logp_dhidden_kernel, (S.cdiv(x.rows, G.BM), S.cdiv(x.width, G.BN)), g_hi, g_lo, slab,
                 weight[v0:v_end], partial, dhidden, x.rows, x.width, n, FIRST=v0 == 0, LAST=v_end == x.vocab,
                 BM=G.BM, BN=G.BN, BK=G.BK, CHUNK=CHUNK, num_warps=G.NUM_WARPS, num_stages=G.NUM_STAGES)
        # dweight rows [v0, v_end) = (G_hi + G_lo)[:, :n]^T @ hidden: the sum over the tokens.
        G.gemm_into(dweight[v0:v_end], g[:, :n].t(), hidden2)
    return {"dhidden": S.to_host(dhidden.reshape(dh_shape)), "dweight": S.to_host(dweight)}


KERNELS = S.kernel_entries(
    OP,
    forward=([linear_logp_state_kernel, L.logprob_row_kernel], forward),
    backward=([linear_logp_state_kernel, L.logprob_row_kernel, linear_logp_grad_kernel, linear_logp_dhidden_kernel,
               G.mma_gemm_kernel], backward))
