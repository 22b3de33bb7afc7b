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
operands' strides: a transpose is a view): one program per output tile, which reduces the
tile's whole K itself (no split-K across programs, no atomics). Each shard is summed by _shard:
L // BK full steps without a k mask, then at most one step zero-filled past the shard's end.
Operands go by TMA (tl.make_tensor_descriptor over the shard alone, [M, L] / [L, N] from its
start, so the hardware zero-fills the tail and the rows / columns past M and N) where the layout
allows it (each operand dense along one dimension, 16-byte aligned rows and shard starts), else
by pointers (rows and columns masked, k masked in the tail step only): the same steps and the
same tensor-core instructions either way. Launch configurations are constants: FWD (128 x 128,
8 warps, 4 stages) for every forward call, split, unsplit and k_partial alike; BWD (128 x 256,
8 warps, 3 stages, one accumulator) for da and db. The two-shard forward (MODE 2) is two
sequential loops: `total` accumulates shard 0 from zero (total = p0 exactly, signs of zero
included), `part` shard 1 from zero, then total + part; two 128 x 128 FP32 accumulators over 8
warps (2 x 64 registers a thread) fit without spills (154 registers with TMA; two 128 x 256
accumulators spill). t >= 3 shards (MODE 3) loop over the shards by pointers (slower). MODE 4
(p0 parked in an FP32 scratch tile, for 128 x 256 tiles) is kept for measurement only.
Measured on the H200 (tools/bench/gemm_peers.py --quick, M = 8192, Qwen3-8B projections):
forward 0.76-0.86x cuBLAS, backward 0.86-0.90x.

Why it is invariant:
  * Deterministic: every element's arithmetic is a fixed sequence of tensor-core steps and FP32
    adds; nothing depends on timing, the grid or the program that owns the tile.
  * Batch-invariant (c and da by row): an element involves only its row of the left operand and
    its column of the right one, the tile shape is a constant and M is not specialized on
    (do_not_specialize; TMA descriptors take M at run time), so a row's bits do not depend on
    how many rows came (db sums over the rows by definition; its rows are k, so its row bound
    alone may be specialized: ROWS_SPEC).
  * TP-invariant: a shard's sum depends only on the shard's values and its length (full steps
    of BK from the shard's start, the zero-filled tail at its end), never on where the shard
    lies in K, on M or on the tile's position. A rank's k_partial call on K half r runs the same
    steps on the same tile (FWD, MODE 1) from its own k = 0, so it returns p_r bit for bit
    (checked on the device, TMA and pointer loads mixed included), and bf16(p0 + p1) of two
    ranks equals the k_shards = 2 forward.
Not bit-equal to cpu_bf16 (its FP32 chains are folded in another order): the tensor core sums
each 16-product step in its own order. Both are FP32 accumulations judged against the reference.
"""
import os
import sys

import torch

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _support as S  # noqa: E402

OP = "det_gemm"
BK = 64                     # the step: every sum runs in BK-wide tl.dot steps from its start
GROUP_M = 8                 # launch order of the tiles (L2 reuse); never changes an element's arithmetic
# The launch configurations: constants (never chosen from M, N or K), one for the forward (the
# split kernel, its k_partial twin and the unsplit forward all use it, so their shards are
# summed by the same steps on the same tile) and one for the backward's two products.
#   BM, BN  the tile; warps, stages  Triton's; tma  operands by tensor descriptors (TMA) where the
#   layout allows (row-major a and b, 16-byte aligned), else by pointers (the same steps);
#   scratch  the split's shard-0 sum parked in an FP32 scratch tile (one accumulator in
#   registers) instead of a second register accumulator.
FWD = {"BM": 128, "BN": 128, "warps": 8, "stages": 4, "tma": True, "scratch": False}
BWD = {"BM": 128, "BN": 256, "warps": 8, "stages": 3, "tma": True, "scratch": False}
BM, BN = FWD["BM"], FWD["BN"]
NUM_WARPS, NUM_STAGES = FWD["warps"], FWD["stages"]
MODE_ONE, MODE_TWO, MODE_ANY, MODE_TWO_SCRATCH = 1, 2, 3, 4
K_SPLIT = "contract: ws1check_declarations.det_gemm_k_split.shards"


@triton.jit
def _sum_ptr(acc, a_rows, b_cols, in_m, in_n, lo, L, sak, sbk, BK: tl.constexpr):
    """acc + the products of k in [lo, lo + L): L // BK full BK-wide tl.dot steps from lo in
    increasing k (no k mask), then, when L % BK != 0, one step whose k past lo + L is
    zero-filled (nothing beyond the shard is read)."""
    offs_k = tl.arange(0, BK)
    ks = (lo + offs_k).to(tl.int64)
    a_ptrs = a_rows + ks[None, :] * sak
    b_ptrs = b_cols + ks[:, None] * sbk
    for _ in range(0, L // BK):
        a = tl.load(a_ptrs, mask=in_m, other=0.0)
        b = tl.load(b_ptrs, mask=in_n, other=0.0)
        acc = tl.dot(a, b, acc=acc, input_precision="ieee")
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    rem = L % BK
    if rem > 0:
        in_k = offs_k < rem
        a = tl.load(a_ptrs, mask=in_m & in_k[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=in_k[:, None] & in_n, other=0.0)
        acc = tl.dot(a, b, acc=acc, input_precision="ieee")
    return acc


@triton.jit
def _sum_tma(acc, a_ptr, b_ptr, M, N, off_m, off_n, lo, L, sam, sak, sbk, sbn,
             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, A_T: tl.constexpr, B_T: tl.constexpr):
    """_sum_ptr's steps with the operands loaded by TMA: a row-major ([M, K], sak = 1) or, A_T,
    column-major (stored [K, M], sam = 1); b row-major ([K, N], sbn = 1) or, B_T, stored [N, K]
    (sbk = 1). The descriptors span the shard only (k in [lo, lo + L)), so the hardware
    zero-fills the last step past the shard's end (and the rows and columns past M and N)."""
    if A_T:
        a_d = tl.make_tensor_descriptor(a_ptr + lo * sak, shape=[L, M], strides=[sak, 1], block_shape=[BK, BM])
    else:
        a_d = tl.make_tensor_descriptor(a_ptr + lo, shape=[M, L], strides=[sam, 1], block_shape=[BM, BK])
    if B_T:
        b_d = tl.make_tensor_descriptor(b_ptr + lo, shape=[N, L], strides=[sbn, 1], block_shape=[BN, BK])
    else:
        b_d = tl.make_tensor_descriptor(b_ptr + lo * sbk, shape=[L, N], strides=[sbk, 1], block_shape=[BK, BN])
    for i in range(0, tl.cdiv(L, BK)):
        k = i * BK
        if A_T:
            a = a_d.load([k, off_m]).T
        else:
            a = a_d.load([off_m, k])
        if B_T:
            b = b_d.load([off_n, k]).T
        else:
            b = b_d.load([k, off_n])
        acc = tl.dot(a, b, acc=acc, input_precision="ieee")
    return acc


@triton.jit
def _shard(a_ptr, b_ptr, a_rows, b_cols, in_m, in_n, M, N, off_m, off_n, lo, L, sam, sak, sbk, sbn,
           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, TMA: tl.constexpr,
           A_T: tl.constexpr, B_T: tl.constexpr):
    """The FP32 sum from zero of the products of k in [lo, lo + L) (the tile's [BM, BN])."""
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    if TMA:
        acc = _sum_tma(acc, a_ptr, b_ptr, M, N, off_m, off_n, lo, L, sam, sak, sbk, sbn, BM, BN, BK, A_T, B_T)
    else:
        acc = _sum_ptr(acc, a_rows, b_cols, in_m, in_n, lo, L, sak, sbk, BK)
    return acc


# Neither the row count (M, of c and of a) nor the shard count is specialized on (Triton would
# compile variants for M == 1, M % 16 == 0, shards == 1): the same compiled steps for every row
# count, so a row's bits do not depend on M. M_RS is the bound for the rows' mask where a
# specialized one is allowed (ROWS_SPEC: db = a^T @ dy, whose rows are k, not the batch): there
# it tells Triton that the rows' mask is constant in 16s along a's contiguous dimension.
@triton.jit(do_not_specialize=["M", "shards"])
def det_gemm_kernel(a_ptr, b_ptr, c_ptr, s_ptr, M, M_RS, N, K, sam, sak, sbk, sbn, scm, shards, k1,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                    MODE: tl.constexpr, TMA: tl.constexpr, A_T: tl.constexpr, B_T: tl.constexpr,
                    ROWS_SPEC: tl.constexpr):
    """C[m, n] (at c_ptr + m*scm + n; bf16, or float32 unrounded when c is float32) = the sum
    over k of A[m, k] * B[k, n], A[m, k] at a_ptr + m*sam + k*sak, B[k, n] at b_ptr + k*sbk +
    n*sbn. MODE 1: one sum over K; 2: two shards [0, k1), [k1, K) (k1 = K // 2) summed apart,
    p0 + p1; 3: `shards` shards [r*K//t, (r+1)*K//t), folded in shard order; 4: as 2, with p0
    parked in s_ptr's FP32 scratch tile."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    group = GROUP_M * tiles_n                   # tiles in a band of GROUP_M tile rows
    first_m = (pid // group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    off_m = (first_m + (pid % group) % rows) * BM
    off_n = ((pid % group) // rows) * BN
    offs_m = off_m + tl.arange(0, BM)
    offs_n = off_n + tl.arange(0, BN)
    a_rows = a_ptr + offs_m.to(tl.int64)[:, None] * sam
    b_cols = b_ptr + offs_n.to(tl.int64)[None, :] * sbn
    if ROWS_SPEC:
        in_m = (offs_m < M_RS)[:, None]
    else:
        in_m = (offs_m < M)[:, None]
    in_n = (offs_n < N)[None, :]
    if MODE == 1:
        total = _shard(a_ptr, b_ptr, a_rows, b_cols, in_m, in_n, M, N, off_m, off_n, 0, K,
                       sam, sak, sbk, sbn, BM, BN, BK, TMA, A_T, B_T)
    elif MODE == 2:
        total = _shard(a_ptr, b_ptr, a_rows, b_cols, in_m, in_n, M, N, off_m, off_n, 0, k1,
                       sam, sak, sbk, sbn, BM, BN, BK, TMA, A_T, B_T)
        part = _shard(a_ptr, b_ptr, a_rows, b_cols, in_m, in_n, M, N, off_m, off_n, k1, K - k1,
                      sam, sak, sbk, sbn, BM, BN, BK, TMA, A_T, B_T)
        total = total + part  # FP32, round to nearest (fusion is off)
    elif MODE == 4:
        p0 = _shard(a_ptr, b_ptr, a_rows, b_cols, in_m, in_n, M, N, off_m, off_n, 0, k1,
                    sam, sak, sbk, sbn, BM, BN, BK, TMA, A_T, B_T)
        slot = (s_ptr + pid.to(tl.int64) * (BM * BN)
                + tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :])
        tl.store(slot, p0)
        part = _shard(a_ptr, b_ptr, a_rows, b_cols, in_m, in_n, M, N, off_m, off_n, k1, K - k1,
                      sam, sak, sbk, sbn, BM, BN, BK, TMA, A_T, B_T)
        tl.debug_barrier()  # the tile's threads see p0 as stored (bar.sync orders the CTA's memory)
        total = tl.load(slot) + part  # p0 exactly (FP32 round trip), then the one FP32 add
    else:
        total = _shard(a_ptr, b_ptr, a_rows, b_cols, in_m, in_n, M, N, off_m, off_n, 0, K // shards,
                       sam, sak, sbk, sbn, BM, BN, BK, TMA, A_T, B_T)
        for r in range(1, shards):
            lo = (r * K) // shards
            part = _shard(a_ptr, b_ptr, a_rows, b_cols, in_m, in_n, M, N, off_m, off_n, lo,
                          ((r + 1) * K) // shards - lo, sam, sak, sbk, sbn, BM, BN, BK, TMA, A_T, B_T)
            total = total + part
    c = c_ptr + offs_m.to(tl.int64)[:, None] * scm + offs_n[None, :]
    tl.store(c, total.to(c_ptr.dtype.element_ty), mask=in_m & in_n)  # bf16: the one rounding (RNE)


def _tma_alloc(size, alignment, stream):
    return torch.empty(size, device=S.DEVICE, dtype=torch.int8)


_tma_ready = [False]


def _tma_layout(a, b, K, shards):
    """(A_T, B_T) when a and b can go by TMA, else None: each operand dense along one dimension
    (a: along k, or along m when A_T; b: along n, or along k when B_T), 16-byte aligned, its
    other stride a multiple of 16 bytes, and every shard's start 16-byte aligned where the
    operand is dense along k."""
    a_t, b_t = a.stride(1) != 1, b.stride(1) != 1
    a_lead = a.stride(1) if a_t else a.stride(0)   # the stride between a's stored rows
    b_lead = b.stride(0) if not b_t else b.stride(1)
    if (a_t and a.stride(0) != 1) or (b_t and b.stride(0) != 1):
        return None
    if a.data_ptr() % 16 or b.data_ptr() % 16 or (a_lead * 2) % 16 or (b_lead * 2) % 16:
        return None
    if K < BK * shards or K * max(a_lead, b_lead) >= 2 ** 31:
        return None
    if (not a_t or b_t) and any(((r * K) // shards) % 8 for r in range(shards)):
        return None
    return a_t, b_t


def launch_gemm(c, a, b, shards=1, split=True, batch_rows=True):
    """Launches det_gemm_kernel for c = a @ b (see gemm_into); returns Triton's compiled kernel
    (None when there is nothing to compute)."""
    M, K = a.shape
    N = b.shape[1]
    assert b.shape[0] == K and tuple(c.shape) == (M, N) and (N <= 1 or c.stride(1) == 1)
    assert c.dtype in (torch.bfloat16, torch.float32) and shards >= 1
    if M == 0 or N == 0:
        return None
    cfg = FWD if split else BWD
    bm, bn = cfg["BM"], cfg["BN"]
    tiles = S.cdiv(M, bm) * S.cdiv(N, bn)
    if not split or shards == 1:
        mode = MODE_ONE
    elif shards == 2:
        mode = MODE_TWO_SCRATCH if cfg["scratch"] else MODE_TWO
    else:
        mode = MODE_ANY
    layout = _tma_layout(a, b, K, 1 if mode == MODE_ONE else 2) if cfg["tma"] and mode != MODE_ANY else None
    tma = layout is not None
    a_t, b_t = layout if tma else (False, False)
    if tma and not _tma_ready[0]:
        triton.set_allocator(_tma_alloc)
        _tma_ready[0] = True
    scratch = (torch.empty(tiles * bm * bn, dtype=torch.float32, device=S.DEVICE)
               if mode == MODE_TWO_SCRATCH else c)  # else never read
    # db's rows are k, not the batch (its sum runs over the batch): its row bound may be specialized.
    rows_spec = not batch_rows
    meta = {"BM": bm, "BN": bn, "BK": BK, "GROUP_M": GROUP_M, "MODE": mode, "TMA": tma, "A_T": a_t, "B_T": b_t,
            "ROWS_SPEC": rows_spec, "num_warps": cfg["warps"], "num_stages": cfg["stages"],
            "enable_fp_fusion": False, "enable_reflect_ftz": False}
    return det_gemm_kernel[(tiles,)](
        S.pointer_arg(a), S.pointer_arg(b), c, scratch, M, M if rows_spec else 1, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), int(shards), K // 2, **meta)


def gemm_into(c, a, b, shards=1, split=True, batch_rows=True):
    """c = a @ b by det_gemm_kernel: a [M,K], b [K,N] bf16 CUDA tensors or views (any strides);
    c a bf16 (rounded once) or float32 (unrounded) [M,N] CUDA tensor with dense rows. split:
    the forward's kernel (K in `shards` shards); False: one FP32 sum (the backward's).
    batch_rows: M counts the batch's rows (never specialized on); False only for db = a^T @ dy."""
    launch_gemm(c, a, b, shards, split, batch_rows)
    return c


def gemm(a, b, shards=1, split=True, dtype=torch.bfloat16, batch_rows=True):
    """A new contiguous [M,N] of `dtype` = a @ b (see gemm_into); K = 0 gives zeros (the empty
    sum, as the kernel's zero accumulator would)."""
    c = S.poisoned((a.shape[0], b.shape[1]), dtype)
    return gemm_into(c, a, b, shards, split, batch_rows)


def forward_device(a, b, shards=1, partial=False):
    """The forward on CUDA tensors: bf16 c (K in `shards` shards), or with partial the float32
    sum over the whole K given (no split, no rounding)."""
    if partial:
        return gemm(a, b, 1, True, torch.float32)
    return gemm(a, b, shards, True, torch.bfloat16)


def backward_device(a, b, g):
    """(da, db) on CUDA tensors: da = g @ b^T (the sum over N), db = a^T @ g (the sum over M)."""
    da = gemm(g, b.t(), 1, False)  # da[m, k] = sum over n of dy[m, n] * b[k, n]
    db = gemm(a.t(), g, 1, False, batch_rows=False)  # db[k, n] = sum over m of a[m, k] * dy[m, n]
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
