"""det_gemm on triton_cuda_bf16: c[M,N] = a[M,K] @ b[K,N]; backward da = dy @ b^T ([M,K], the sum
over N) and db = a^T @ dy ([K,N], the sum over M); bf16 in and out. The contract's declared K
split (ws1check_declarations.det_gemm_k_split, DESIGN §3.1 Option A): FP32 accumulation
throughout, one rounding to bf16.

What the forward computes, per output element, for t = context["k_shards"] (default 1):
  K is cut into t contiguous shards [r*K//t, (r+1)*K//t); shard r's products are summed in FP32
  from zero (p_r), in BK = 64-wide tl.dot steps in increasing k (bf16 operands on the tensor
  cores, FP32 accumulator, input_precision="ieee": never TF32); a step that runs past the
  shard's end is zero-filled, so nothing beyond the shard is read; then total = p0,
  total += p1, ... (round-to-nearest FP32 adds, shard order) and c = bf16(total), rounded once
  to nearest even.
With context["k_partial"] (set by the tensor-parallel transform on a rank's call) the forward
returns c as float32: the one FP32 sum p over the whole K it was given (no split, no rounding),
what a row-parallel rank contributes to the all-reduce.
Backward: da and db are each one FP32 sum over their whole reduction (N for da, M for db) in the
same BK-wide steps, rounded once to bf16; no split.

Kernel det_gemm_kernel (one for the forward and the backward's two products, which differ in the
operands' strides: a transpose is a view): one program per 128 x 128 output tile, which reduces
the tile's whole K itself (no split-K across programs, no atomics). The forward holds two FP32
accumulators: `total`, into which shard 0 is accumulated directly from zero (so total = p0
exactly, signs of zero included), and `part`, restarted from zero for each later shard and added
into `total` when that shard ends. Two 128 x 128 FP32 tiles over 8 warps are 2 x 64 registers a
thread, which fits beside the operand pipeline (4 stages); the project measured this shape at
0.76x cuBLAS split vs 0.78x unsplit, while two 128 x 256 accumulators spilled (0.12x). The
backward compiles the same kernel with one accumulator (SPLIT=False).

Why it is invariant:
  * Deterministic: every element's arithmetic is a fixed sequence of tensor-core steps and FP32
    adds; nothing depends on timing, the grid or the program that owns the tile.
  * Batch-invariant (c and da by row): an element involves only its row of the left operand and
    its column of the right one, the tile shape is a constant and M is not specialized on, so a
    row's bits do not depend on how many rows came (db sums over the rows by definition).
  * TP-invariant: a shard's sum depends only on the shard's values and its length (steps of BK
    from the shard's start, the zero-filled tail at its end), never on where the shard lies in
    K, on M or on the tile's position. A rank's k_partial call on K half r runs the same steps
    (the same kernel, shards = 1 by a runtime argument that is not specialized on) from its own
    k = 0, so it returns p_r bit for bit, and bf16(p0 + p1) of two ranks equals the k_shards = 2
    forward.
Not bit-equal to cpu_bf16 (its FP32 chains are folded in another order): the tensor core sums
each 16-product step in its own order. Both are FP32 accumulations judged against the reference.
"""
import os
import sys

import torch

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _gemm as G  # noqa: E402
import _support as S  # noqa: E402

OP = "det_gemm"
BM, BN, BK = 128, 128, 64   # the tile: a constant, so a row's bits never depend on the call's shape
GROUP_M = 8                 # launch order of the tiles (L2 reuse); never changes an element's arithmetic
NUM_WARPS, NUM_STAGES = 8, 4
K_SPLIT = "contract: ws1check_declarations.det_gemm_k_split.shards"


@triton.jit
def _shard_sum(a_rows, b_cols, in_m, in_n, lo, hi, sak, sbk, acc, BK: tl.constexpr):
    """acc + the products of k in [lo, hi): BK-wide tl.dot steps from lo in increasing k, the
    last one zero-filled past hi (_gemm._mma_step masks k >= its bound)."""
    for k0 in range(lo, hi, BK):
        acc = G._mma_step(a_rows, b_cols, in_m, in_n, k0, hi, sak, sbk, acc, BK)
    return acc


# Neither the row count nor the shard count is specialized on (Triton would compile variants for
# M == 1, M % 16 == 0, shards == 1): the same compiled steps for every call, so a row's bits do
# not depend on M, and a k_partial rank's sum is the split forward's shard bit for bit.
@triton.jit(do_not_specialize=["M", "shards"])
def det_gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, shards,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                    SPLIT: tl.constexpr):
    """C[m, n] (at c_ptr + m*scm + n; bf16, or float32 unrounded when c is float32) = the sum
    over k of A[m, k] * B[k, n], A[m, k] at a_ptr + m*sam + k*sak, B[k, n] at b_ptr + k*sbk +
    n*sbn. SPLIT: K in `shards` shards summed apart and added in shard order; else one sum."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    group = GROUP_M * tiles_n                   # tiles in a band of GROUP_M tile rows
    first_m = (pid // group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % group) % rows
    tile_n = (pid % group) // rows
    offs_m = tile_m * BM + tl.arange(0, BM)
    offs_n = tile_n * BN + tl.arange(0, BN)
    a_rows = a_ptr + offs_m.to(tl.int64)[:, None] * sam
    b_cols = b_ptr + offs_n.to(tl.int64)[None, :] * sbn
    in_m = (offs_m < M)[:, None]
    in_n = (offs_n < N)[None, :]
    total = tl.zeros((BM, BN), dtype=tl.float32)
    if SPLIT:
        # Shard 0 accumulates into the total from zero: total = p0.
        total = _shard_sum(a_rows, b_cols, in_m, in_n, 0, K // shards, sak, sbk, total, BK)
        for r in range(1, shards):
            part = tl.zeros((BM, BN), dtype=tl.float32)
            part = _shard_sum(a_rows, b_cols, in_m, in_n, (r * K) // shards, ((r + 1) * K) // shards,
                              sak, sbk, part, BK)
            total = total + part  # FP32, round to nearest (fusion is off)
    else:
        total = _shard_sum(a_rows, b_cols, in_m, in_n, 0, K, sak, sbk, total, BK)
    c = c_ptr + offs_m.to(tl.int64)[:, None] * scm + offs_n[None, :]
    tl.store(c, total.to(c_ptr.dtype.element_ty), mask=in_m & in_n)  # bf16: the one rounding (RNE)


def gemm_into(c, a, b, shards=1, split=True):
    """c = a @ b by det_gemm_kernel: a [M,K], b [K,N] bf16 CUDA tensors or views (any strides);
    c a bf16 (rounded once) or float32 (unrounded) [M,N] CUDA tensor with dense rows. split:
    the forward's kernel (K in `shards` shards); False: one FP32 sum (the backward's)."""
    M, K = a.shape
    N = b.shape[1]
    assert b.shape[0] == K and tuple(c.shape) == (M, N) and (N <= 1 or c.stride(1) == 1)
    assert c.dtype in (torch.bfloat16, torch.float32) and shards >= 1
    if M == 0 or N == 0:
        return c
    S.launch(det_gemm_kernel, (S.cdiv(M, BM) * S.cdiv(N, BN),),
             S.pointer_arg(a), S.pointer_arg(b), c, M, N, K,
             a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), int(shards),
             BM=BM, BN=BN, BK=BK, GROUP_M=GROUP_M, SPLIT=bool(split),
             num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return c


def gemm(a, b, shards=1, split=True, dtype=torch.bfloat16):
    """A new contiguous [M,N] of `dtype` = a @ b (see gemm_into); K = 0 gives zeros (the empty
    sum, as the kernel's zero accumulator would)."""
    c = S.poisoned((a.shape[0], b.shape[1]), dtype)
    return gemm_into(c, a, b, shards, split)


def forward_device(a, b, shards=1, partial=False):
    """The forward on CUDA tensors: bf16 c (K in `shards` shards), or with partial the float32
    sum over the whole K given (no split, no rounding)."""
    if partial:
        return gemm(a, b, 1, True, torch.float32)
    return gemm(a, b, shards, True, torch.bfloat16)


def backward_device(a, b, g):
    """(da, db) on CUDA tensors: da = g @ b^T (the sum over N), db = a^T @ g (the sum over M)."""
    da = gemm(g, b.t(), 1, False)  # da[m, k] = sum over n of dy[m, n] * b[k, n]
    db = gemm(a.t(), g, 1, False)  # db[k, n] = sum over m of a[m, k] * dy[m, n]
    return da, db


def _shards(context):
    """context["k_shards"]: an integer >= 1; 1 (no split) when absent."""
    t = context.get("k_shards", 1)
    S.require(isinstance(t, int) and not isinstance(t, bool), OP, "k_shards",
              f"must be an integer ({K_SPLIT}), got {t!r}")
    S.require(t >= 1, OP, "k_shards", f"must be >= 1 ({K_SPLIT}), got {t}")
    return t


def _partial(context):
    """context["k_partial"]: true or false; false when absent."""
    p = context.get("k_partial", False)
    S.require(isinstance(p, bool), OP, "k_partial", f"must be true or false, got {p!r}")
    return p


def _inputs(tensors, with_dy):
    """a [M,K], b [K,N] and (backward) dy.c [M,N], all bf16, checked like det_gemm_inputs()."""
    a = S.bf16_input(tensors, OP, "a", 2)
    b = S.bf16_input(tensors, OP, "b", 2)
    S.require(b.shape[0] == a.shape[1], OP, "b",
              f"shape {S.shape_string(b.shape)} does not fit a {S.shape_string(a.shape)} "
              f"(needs [K, N] with K = {a.shape[1]})")
    if not with_dy:
        return a, b, None
    dy = S.bf16_input(tensors, OP, "dy.c", 2)
    want = [a.shape[0], b.shape[1]]
    S.require(list(dy.shape) == want, OP, "dy.c",
              f"shape {S.shape_string(dy.shape)} (expected c's shape {S.shape_string(want)})")
    return a, b, dy


def forward(tensors, context):
    # "k_tree_leaf" (Option B's leaf width) may still come from older hosts: not read.
    a, b, _ = _inputs(tensors, False)
    shards, partial = _shards(context), _partial(context)
    c = forward_device(S.to_device(a), S.to_device(b), shards, partial)
    return {"c": S.to_host(c)}  # bf16, or float32 under k_partial


def backward(tensors, context):
    a, b, dy = _inputs(tensors, True)
    _shards(context), _partial(context)  # a bad context is an error in either direction
    da, db = backward_device(S.to_device(a), S.to_device(b), S.to_device(dy))
    return {"da": S.to_host(da), "db": S.to_host(db)}


KERNELS = S.kernel_entries(OP, forward=([det_gemm_kernel], forward),
                           backward=([det_gemm_kernel], backward))
