"""det_gemm on triton_cuda_bf16: c[M,N] = a[M,K] @ b[K,N]; backward da = dy @ b^T (over N) and
db = a^T @ dy (over M); bf16 in and out. Same contract and checks as the cpu_bf16 candidate
(lib/ops/det_gemm.cpp) and the cuda_bf16 kernel (cuda/ops/det_gemm.cu), and the same bits: the
declared tree (spec §9.2 Option B, decision D11), per output element:
  the reduction range [lo,hi) is a leaf when hi - lo <= k_tree_leaf (the op context's, 32 in the
  contract), else it splits at mid = lo + (hi - lo) // 2; a leaf is an FP32 fma chain from 0.0
  in increasing k (acc = fma(a, b, acc)), rounded to bf16; a merge is
  bf16(float(left) + float(right)); the output is the bf16 root.
The tree depends on the reduction length and the leaf width only, so the host lists its leaves
once, in k order, each as (lo, hi, merges completing right after it) (tree_plan, the CPU's and
cuda's plan), and the kernel evaluates it in post-order with a stack of pending bf16 values per
output element. da's tree runs over N and db's over M, the same shape over their own reduction
dimension ("the same tree for dA and dB", DESIGN §6).

Choice (why no tl.dot): a leaf is computed as the declared sequential FMA chain, one tl.fma per
k, exactly as the cuda_bf16 naive kernel does, never as a tl.dot: a tensor-core MMA sums its
k16 products in its own internal order (and its FP32 accumulation is not round-to-nearest), so
a dot over a 32-wide leaf would not give the chain's bits, and the audit's declared-tree probe
(ws1/declared_order.hpp) checks c, da and db bit for bit against cpu_bf16. A bf16 x bf16
product is exact in FP32, so the chain's only roundings are the declared ones; the merge's add
is written out (fusion is off, _support.launch) and rounded to bf16 with a round-to-nearest-even
conversion, as the CPU's to_bf16. So this kernel equals cpu_bf16 bit for bit, as cuda_bf16's does.

Kernel det_gemm_tree_kernel (one for the three products, which differ in the operands' strides):
a persistent grid of programs, each walking output tiles of 64 x 64 (tile ids pid, pid + P, ...);
per tile, the leaves in k order: the FMA chain in registers, then its merges against the stack,
which lives in a per-program scratch in global memory (depth x 64 x 64 bf16; a mid-split tree's
stack is O(log(K / leaf)) deep), with a CTA barrier on both sides of every push so that no
thread reads a slot before it is written or overwrites one another thread has yet to read.
Determinism and invariance: every element's arithmetic involves only its row of the left operand
and its column of the right one, in the tree's fixed order, whatever the tile, the program or
the grid: identical bits run to run, c's and da's rows do not depend on M (batch-invariant), and
for K > k_tree_leaf a contiguous half-K GEMM is the root's child, so two half-K ranks merged in
bf16 give the same bits (TP2-invariant). db sums over the rows of the call by definition.
"""
import os
import sys

import torch

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _support as S  # noqa: E402

OP = "det_gemm"
BM, BN = 64, 64          # output tile per program step
NUM_WARPS = 4
PROGRAMS_PER_SM = 4      # persistent grid: bounds the stack scratch, never the arithmetic


def _tree_steps(lo, hi, leaf, out):
    if hi - lo <= leaf:
        out.append([lo, hi, 0])
        return
    mid = lo + (hi - lo) // 2
    _tree_steps(lo, mid, leaf, out)
    _tree_steps(mid, hi, leaf, out)
    out[-1][2] += 1  # this node completes right after its right subtree


def tree_plan(k, leaf):
    """The declared tree over [0, k): (flat [lo, hi, merges] per leaf in k order, stack depth)."""
    steps = []
    if k > 0:
        _tree_steps(0, k, leaf, steps)
    sp = depth = 0
    for _, _, merges in steps:
        sp = sp - merges + 1
        depth = max(depth, sp)
    return [v for s in steps for v in s], depth


@triton.jit
def det_gemm_tree_kernel(a_ptr, b_ptr, c_ptr, stack_ptr, steps_ptr, nsteps, M, N,
                         sam, sak, sbk, sbn, depth,
                         BM: tl.constexpr, BN: tl.constexpr):
    # C[m, n] (row-major [M, N]) = the declared tree over k of A[m, k] * B[k, n], where A[m, k] is
    # at a_ptr + m*sam + k*sak and B[k, n] at b_ptr + k*sbk + n*sbn.
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    tiles = tl.cdiv(M, BM) * tiles_n
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    slot = rm[:, None] * BN + rn[None, :]
    stack = stack_ptr + pid.to(tl.int64) * depth * (BM * BN)  # this program's scratch
    for tile in range(pid, tiles, tl.num_programs(0)):
        offs_m = (tile // tiles_n) * BM + rm
        offs_n = (tile % tiles_n) * BN + rn
        in_m = offs_m < M
        in_n = offs_n < N
        a_rows = a_ptr + offs_m.to(tl.int64) * sam
        b_cols = b_ptr + offs_n.to(tl.int64) * sbn
        sp = pid * 0  # pending values on the stack
        for s in range(0, nsteps):
            lo = tl.load(steps_ptr + 3 * s)
            hi = tl.load(steps_ptr + 3 * s + 1)
            merges = tl.load(steps_ptr + 3 * s + 2)
            # The leaf: FP32 fma chain from 0.0 in increasing k (bf16 x bf16 is exact in FP32).
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for k in range(lo, hi):
                av = tl.load(a_rows + k.to(tl.int64) * sak, mask=in_m, other=0.0).to(tl.float32)
                bv = tl.load(b_cols + k.to(tl.int64) * sbk, mask=in_n, other=0.0).to(tl.float32)
                acc = tl.fma(tl.broadcast_to(av[:, None], (BM, BN)), tl.broadcast_to(bv[None, :], (BM, BN)), acc)
            v = S.round_bf16(acc)  # on the bits: a .to(bf16).to(fp32) round trip may be folded
            # The merges that complete after this leaf: left (older) + right, rounded to bf16.
            for q in range(0, merges):
                sp -= 1
                left = tl.load(stack + sp * (BM * BN) + slot).to(tl.float32)
                v = S.round_bf16(left + v)
            tl.debug_barrier()  # every thread has read the slots it merged
            tl.store(stack + sp * (BM * BN) + slot, v.to(tl.bfloat16))
            tl.debug_barrier()  # ... and the push is visible to the whole program
            sp += 1
        root = tl.load(stack + slot)  # slot 0: the one value left
        c = c_ptr + offs_m.to(tl.int64)[:, None] * N + offs_n[None, :]
        tl.store(c, root, mask=in_m[:, None] & in_n[None, :])


def _sm_count():
    return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count


def tree_gemm(a, b, leaf):
    """bf16 [M,N] = the declared tree of a [M,K] @ b [K,N] (CUDA bf16 tensors or views)."""
    M, K = a.shape
    N = b.shape[1]
    if K == 0 and M * N > 0:
        return torch.zeros((M, N), dtype=torch.bfloat16, device=S.DEVICE)  # an empty sum, as the CPU
    c = S.poisoned((M, N), torch.bfloat16)
    if M == 0 or N == 0:
        return c
    flat, depth = tree_plan(K, leaf)
    steps = torch.tensor(flat, dtype=torch.int32).to(S.DEVICE)
    tiles = S.cdiv(M, BM) * S.cdiv(N, BN)
    programs = min(tiles, PROGRAMS_PER_SM * _sm_count())
    stack = torch.empty(programs * depth * BM * BN, dtype=torch.bfloat16, device=S.DEVICE)
    S.launch(det_gemm_tree_kernel, (programs,), a, b, c, stack, steps, len(flat) // 3, M, N,
             a.stride(0), a.stride(1), b.stride(0), b.stride(1), depth,
             BM=BM, BN=BN, num_warps=NUM_WARPS, num_stages=1)
    return c


def _leaf(context):
    S.require("k_tree_leaf" in context, OP, "k_tree_leaf", "missing from the op context")
    leaf = int(context["k_tree_leaf"])
    S.require(leaf >= 1, OP, "k_tree_leaf",
              "must be >= 1 (contract: ws1check_declarations.accumulation_exceptions.det_gemm.k_tree_leaf), "
              f"got {leaf}")
    return leaf


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
    a, b, _ = _inputs(tensors, False)
    leaf = _leaf(context)
    c = tree_gemm(S.to_device(a), S.to_device(b), leaf)  # c[m, n] = sum over k of a[m, k] * b[k, n]
    return {"c": S.to_host(c)}


def backward(tensors, context):
    a, b, dy = _inputs(tensors, True)
    leaf = _leaf(context)
    a, b, g = S.to_device(a), S.to_device(b), S.to_device(dy)
    da = tree_gemm(g, b.t(), leaf)  # da[m, k] = sum over n of dy[m, n] * b[k, n]: the tree over N
    db = tree_gemm(a.t(), g, leaf)  # db[k, n] = sum over m of a[m, k] * dy[m, n]: the tree over M
    return {"da": S.to_host(da), "db": S.to_host(db)}


KERNELS = S.kernel_entries(OP, forward=([det_gemm_tree_kernel], forward),
                           backward=([det_gemm_tree_kernel], backward))
