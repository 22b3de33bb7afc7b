"""The tensor-core tile GEMM shared by lm_head and linear_logp (the Triton twin of
cuda/ops/gemm_tiles.cuh): C[M,N] = A[M,K] @ B[K,N] over bf16 operands with FP32 accumulation.

Operands are strided views: element (m, k) of A at a_ptr + m*sam + k*sak, element (k, n) of B
at b_ptr + k*sbk + n*sbn, so one kernel does the NT (logits = hidden @ W^T), NN (dhidden =
dy @ W) and TN (dweight = dy^T @ hidden) products without copies.

K order, for every output element (dot_tile): k in BK-wide slices in increasing k, each slice
one tl.dot with input_precision="ieee" (bf16 operands on the tensor cores, FP32 accumulator;
never TF32) accumulating into the running FP32 accumulator. The one program that owns a tile
reduces its whole K: no split-K, no atomics. An element's arithmetic involves only its row of A
and its column of B, and the tile shape is a constant (never chosen from M, N or K), so the bits
do not depend on the number of rows, the tile's position or the grid: deterministic, and
batch-invariant over the rows of A. Out-of-range rows, columns and k are loaded as zeros.

Long K (K > PROMOTE_ABOVE_K = 4096, as gemm_tiles.cuh's kPromoteAboveK): the tensor core's FP32
accumulation drops low bits at each step, which grows with the number of steps (lm_head's
dhidden over V = 151936 went over the contract row on cuda_bf16 before the fix, docs/log/gpu-runs.md).
So K is cut into SLAB = 512-wide slabs from k = 0; each slab is accumulated from zero on the
tensor cores and added to a separate FP32 total with a round-to-nearest add, slabs in increasing
k. The order is fixed by K alone.
"""
import os
import sys

import torch

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _support as S  # noqa: E402

BM, BN, BK = 128, 128, 64   # the tile: a constant, so a row's bits never depend on the call's shape
SLAB = 512                  # k per promotion (a multiple of BK)
PROMOTE_ABOVE_K = 4096      # K up to a hidden width: one accumulator
NUM_WARPS, NUM_STAGES = 8, 3


def promote(k):
    """Whether a reduction of length k is promoted slab by slab into an FP32 total."""
    return int(k) > PROMOTE_ABOVE_K


@triton.jit
def _mma_step(a_rows, b_cols, in_m, in_n, k0, K, sak, sbk, acc, BK: tl.constexpr):
    """acc + A[:, k0:k0+BK] @ B[k0:k0+BK, :] on the tensor cores (FP32 accumulate)."""
    ks = k0 + tl.arange(0, BK)
    in_k = ks < K
    a = tl.load(a_rows + ks.to(tl.int64)[None, :] * sak, mask=in_m & in_k[None, :], other=0.0)
    b = tl.load(b_cols + ks.to(tl.int64)[:, None] * sbk, mask=in_k[:, None] & in_n, other=0.0)
    return tl.dot(a, b, acc=acc, input_precision="ieee")


@triton.jit
def dot_tile(a_ptr, b_ptr, offs_m, offs_n, M, N, K, sam, sak, sbk, sbn,
             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SLAB: tl.constexpr,
             PROMOTE: tl.constexpr):
    """The FP32 tile A[offs_m, :] @ B[:, offs_n] in the module's K order ([BM, BN])."""
    a_rows = a_ptr + offs_m.to(tl.int64)[:, None] * sam
    b_cols = b_ptr + offs_n.to(tl.int64)[None, :] * sbn
    in_m = (offs_m < M)[:, None]
    in_n = (offs_n < N)[None, :]
    total = tl.zeros((BM, BN), dtype=tl.float32)
    if PROMOTE:
        for s0 in range(0, K, SLAB):
            part = tl.zeros((BM, BN), dtype=tl.float32)
            for k0 in range(s0, tl.minimum(s0 + SLAB, K), BK):
                part = _mma_step(a_rows, b_cols, in_m, in_n, k0, K, sak, sbk, part, BK)
            total = total + part  # round to nearest: the promotion
    else:
        for k0 in range(0, K, BK):
            total = _mma_step(a_rows, b_cols, in_m, in_n, k0, K, sak, sbk, total, BK)
    return total


# The row count is not specialized on (Triton would compile variants for M % 16 == 0 or M == 1):
# one compiled kernel for every call shape, so a row's bits cannot depend on how many rows came.
@triton.jit(do_not_specialize=["M"])
def mma_gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SLAB: tl.constexpr,
                    PROMOTE: tl.constexpr):
    """C[m, n] (at c_ptr + m*scm + n) = bf16(dot_tile), rounded once to nearest even."""
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    offs_m = (pid // tiles_n) * BM + tl.arange(0, BM)
    offs_n = (pid % tiles_n) * BN + tl.arange(0, BN)
    acc = dot_tile(a_ptr, b_ptr, offs_m, offs_n, M, N, K, sam, sak, sbk, sbn, BM, BN, BK, SLAB, PROMOTE)
    c = c_ptr + offs_m.to(tl.int64)[:, None] * scm + offs_n[None, :]
    tl.store(c, acc.to(tl.bfloat16), mask=(offs_m < M)[:, None] & (offs_n < N)[None, :])


def gemm_into(c, a, b):
    """c = a @ b (bf16 out) by mma_gemm_kernel. a [M,K] and b [K,N] are bf16 CUDA tensors or
    views of them (any strides: a transpose is a view); c is a bf16 [M,N] CUDA tensor whose rows
    are dense (stride(1) == 1), e.g. a row block of a contiguous matrix."""
    M, K = a.shape
    N = b.shape[1]
    assert b.shape[0] == K and tuple(c.shape) == (M, N) and (N <= 1 or c.stride(1) == 1)
    if M == 0 or N == 0:
        return
    S.launch(mma_gemm_kernel, (S.cdiv(M, BM) * S.cdiv(N, BN),),
             S.pointer_arg(a), S.pointer_arg(b), c, M, N, K,
             a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
             BM=BM, BN=BN, BK=BK, SLAB=SLAB, PROMOTE=promote(K),
             num_warps=NUM_WARPS, num_stages=NUM_STAGES)


def gemm(a, b):
    """A new contiguous bf16 [M,N] = a @ b (see gemm_into); K = 0 gives zeros."""
    c = S.poisoned((a.shape[0], b.shape[1]), torch.bfloat16)
    gemm_into(c, a, b)
    return c
