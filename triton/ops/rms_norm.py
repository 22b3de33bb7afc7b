"""rms_norm on triton_cuda_bf16 (lib/ops/rms_norm.cpp states the definition):
y = x * rstd * w with rstd = 1 / sqrt(mean(x^2) + eps) over the last dimension, and its
backward (dx, dweight). qk_norm (qk_norm.py) runs the same kernels on rows of head_dim.

Arithmetic and order are the cpu_bf16 candidate's (and cuda_bf16's, cuda/ops/rms_norm.cuh),
operation by operation, so the bits match — except dweight's order: since docs/decisions.md
D24 cpu_bf16 and cuda_bf16 sum it in blocks of 256 rows, this kernel still in one row-order
chain (equal bits up to 256 rows; a deterministic order either way). The audit's rounding-order
probe compares y bit for bit with cpu_bf16:
  - statistic: the sum of x*x in fixed 32-wide chunks; within a chunk fused multiply-adds
    left to right from +0 (tl.fma), then the chunk sums added left to right from +0. The
    backward's sum(g*x), g = dy*w rounded to FP32, uses the same chunks.
  - rstd = 1 / sqrt(sumsq / W + eps) with IEEE division and square root (tl.div_rn,
    tl.sqrt_rn), eps the float32 rounding of the context's rms_norm_eps.
  - forward, the contract's order (context rms_norm_order): "kernel" bf16(fp32(x*rstd)*w),
    "hf" bf16(bf16(x*rstd)*w), the inner rounding done on the bits (_support.round_bf16).
  - backward: coef = (((rstd*rstd)*rstd)*sum(g*x)) * (1/W); dx = bf16(rstd*g - x*coef);
    dweight[i] = bf16 of acc over rows r = 0, 1, ... in index order of
    acc = fma(dy[r,i]*x[r,i], rstd[r], acc), from +0.
  Every other multiply and add is one IEEE operation: fusion is off for every launch
  (_support.launch), so nothing is contracted into an FMA the definition does not have.

Work split. Row kernels: a program owns ROWS rows, one row per lane of one warp; each lane runs
its row's chunks sequentially (the loop over a chunk's 32 columns is unrolled, so its loads are
in flight together), which is what makes the in-chunk order left to right without any
cross-lane reduction. Then the program writes its rows' outputs tile by tile ([ROWS, BLOCK_W],
coalesced). The backward also stores each row's rstd (FP32) for the dweight kernel.
dweight kernel: a program owns DW_COLS columns, one per lane, and walks all rows in index order
(DW_UNROLL rows' loads in flight, their fmas in order). No atomics, no split of any sum.

Why deterministic and batch-invariant: each output element is computed by exactly one lane with
a fixed sequence of operations that depends only on the row's own data and the width, not on
the number of rows, the row's position or the grid; masked lanes of a partial program add exact
zeros (fma(0, 0, acc) = acc) and store nothing. dweight sums over the call's rows in row index
order (a parameter gradient: D13 judges it bit for bit under layout and tp2, which keep the
rows and their order).
"""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _support as S  # noqa: E402
from _support import round_bf16  # noqa: E402

OP = "rms_norm"
CHUNK = 32      # the statistic's chunk (chunked_sum_squares in lib/ops/op_support.cpp)
ROWS = 32       # rows per program of the row kernels: one per lane of one warp
BLOCK_W = 64    # columns per output tile of the row kernels
DW_COLS = 32    # columns per program of the dweight kernel: one per lane
DW_UNROLL = 8   # rows whose loads the dweight kernel issues before their in-order fmas
ORDERS = ("kernel", "hf")


@triton.jit
def _row_sums(x_ptr, dy_ptr, w_ptr, base, rmask, width, BACKWARD: tl.constexpr, ROWS: tl.constexpr,
              CHUNK: tl.constexpr):
    """Per row (lane): sum of x*x and, with BACKWARD, sum of (dy*w)*x, in 32-wide chunks."""
    sumsq = tl.zeros([ROWS], dtype=tl.float32)
    dot = tl.zeros([ROWS], dtype=tl.float32)
    for c0 in range(0, width, CHUNK):
        part_sq = tl.zeros([ROWS], dtype=tl.float32)
        part_dot = tl.zeros([ROWS], dtype=tl.float32)
        for j in tl.static_range(CHUNK):
            col = c0 + j
            inside = col < width
            m = rmask & inside
            x = tl.load(x_ptr + base + col, mask=m, other=0.0).to(tl.float32)
            part_sq = tl.fma(x, x, part_sq)
            if BACKWARD:
                w = tl.load(w_ptr + col, mask=inside, other=0.0).to(tl.float32)
                dy = tl.load(dy_ptr + base + col, mask=m, other=0.0).to(tl.float32)
                part_dot = tl.fma(dy * w, x, part_dot)
        sumsq = sumsq + part_sq
        if BACKWARD:
            dot = dot + part_dot
    return sumsq, dot


@triton.jit
def _program_rows(x_ptr, dy_ptr, w_ptr, rows, width, width_f, eps, BACKWARD: tl.constexpr, ROWS: tl.constexpr,
                  CHUNK: tl.constexpr):
    """This program's rows r (one per lane), their mask and element offsets, and per row
    rstd = 1 / sqrt(sumsq / W + eps) and, with BACKWARD, sum((dy*w)*x) (else 0)."""
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    rmask = r < rows
    base = r * width
    sumsq, dot = _row_sums(x_ptr, dy_ptr, w_ptr, base, rmask, width, BACKWARD, ROWS, CHUNK)
    rstd = tl.div_rn(1.0, tl.sqrt_rn(tl.div_rn(sumsq, width_f) + eps))
    return r, rmask, base, rstd, dot


@triton.jit
def _tile(x_ptr, w_ptr, base, rmask, c0, width, BLOCK_W: tl.constexpr):
    """The [ROWS, BLOCK_W] output tile at column c0: offsets, mask, x (float32) and w (float32,
    one per column)."""
    cols = c0 + tl.arange(0, BLOCK_W)
    cmask = cols < width
    m2 = rmask[:, None] & cmask[None, :]
    offs = base[:, None] + cols[None, :]
    x = tl.load(x_ptr + offs, mask=m2, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    return offs, m2, x, w


@triton.jit
def rms_norm_fwd_kernel(x_ptr, w_ptr, y_ptr, rows, width, width_f, eps, HF: tl.constexpr,
                        ROWS: tl.constexpr, CHUNK: tl.constexpr, BLOCK_W: tl.constexpr):
    r, rmask, base, rstd, unused = _program_rows(x_ptr, x_ptr, w_ptr, rows, width, width_f, eps, False, ROWS, CHUNK)
    for c0 in range(0, width, BLOCK_W):
        offs, m2, x, w = _tile(x_ptr, w_ptr, base, rmask, c0, width, BLOCK_W)
        normed = x * rstd[:, None]
        if HF:
            normed = round_bf16(normed)  # on the bits: Triton can fold a .to(bf16).to(fp32) round trip
        tl.store(y_ptr + offs, (normed * w[None, :]).to(tl.bfloat16), mask=m2)


@triton.jit
def rms_norm_bwd_kernel(x_ptr, w_ptr, dy_ptr, dx_ptr, rstd_ptr, rows, width, width_f, eps,
                        ROWS: tl.constexpr, CHUNK: tl.constexpr, BLOCK_W: tl.constexpr):
    r, rmask, base, rs, dot = _program_rows(x_ptr, dy_ptr, w_ptr, rows, width, width_f, eps, True, ROWS, CHUNK)
    tl.store(rstd_ptr + r, rs, mask=rmask)
    inv_width = tl.div_rn(1.0, width_f)
    coef = (((rs * rs) * rs) * dot) * inv_width
    for c0 in range(0, width, BLOCK_W):
        offs, m2, x, w = _tile(x_ptr, w_ptr, base, rmask, c0, width, BLOCK_W)
        dy = tl.load(dy_ptr + offs, mask=m2, other=0.0).to(tl.float32)
        g = dy * w[None, :]
        dx = rs[:, None] * g - x * coef[:, None]
        tl.store(dx_ptr + offs, dx.to(tl.bfloat16), mask=m2)


@triton.jit
def rms_norm_dweight_kernel(dy_ptr, x_ptr, rstd_ptr, dw_ptr, rows, width, DW_COLS: tl.constexpr,
                            DW_UNROLL: tl.constexpr):
    cols = tl.program_id(0) * DW_COLS + tl.arange(0, DW_COLS)
    cmask = cols < width
    acc = tl.zeros([DW_COLS], dtype=tl.float32)
    for r0 in range(0, rows, DW_UNROLL):
        for u in tl.static_range(DW_UNROLL):
            r = r0 + u
            ok = r < rows
            offs = r.to(tl.int64) * width + cols
            dy = tl.load(dy_ptr + offs, mask=cmask & ok, other=0.0).to(tl.float32)
            x = tl.load(x_ptr + offs, mask=cmask & ok, other=0.0).to(tl.float32)
            rs = tl.load(rstd_ptr + r, mask=ok, other=0.0)
            acc = tl.fma(dy * x, rs, acc)
    tl.store(dw_ptr + cols, acc.to(tl.bfloat16), mask=cmask)


class NormInputs:
    """A checked call, as lib/ops' check_norm_inputs: x [..., W], weight [W], dy.y like x."""

    def __init__(self, op, tensors, backward):
        self.x = S.bf16_input(tensors, op, "x")
        self.weight = S.bf16_input(tensors, op, "weight", 1)
        self.dy = S.bf16_input(tensors, op, "dy.y") if backward else None
        S.require(self.x.dim() >= 1, op, "x", "needs at least one dimension")
        self.width = int(self.x.shape[-1])
        S.require(int(self.weight.shape[0]) == self.width, op, "weight",
                  f"shape {S.shape_string(self.weight.shape)} does not match x's last dimension {self.width}")
        if backward:
            S.require(list(self.dy.shape) == list(self.x.shape), op, "dy.y", "shape differs from x")
        self.rows = self.x.numel() // self.width if self.width else 0


def _eps(context):
    """static_cast<float>(ctx.rms_norm_eps), as the C++ side takes it."""
    return S.f32(context.get("rms_norm_eps", 0.0))


def forward_of(op, tensors, context):
    """The forward of rms_norm (or qk_norm, whose rows are heads) on checked-here inputs."""
    s = NormInputs(op, tensors, False)
    order = context.get("rms_norm_order", "kernel")
    S.require(order in ORDERS, op, "rms_norm_order", f"{order!r} (expected kernel or hf)")
    eps = _eps(context)
    x, w = S.to_device(s.x), S.to_device(s.weight)
    y = S.poisoned(s.x.shape, torch.bfloat16)
    if s.rows > 0:
        S.launch(rms_norm_fwd_kernel, (S.cdiv(s.rows, ROWS),), x, w, y, s.rows, s.width, float(s.width), eps,
                 HF=order == "hf", ROWS=ROWS, CHUNK=CHUNK, BLOCK_W=BLOCK_W, num_warps=1)
    return {"y": S.to_host(y)}


def backward_of(op, tensors, context):
    """The backward of rms_norm (or qk_norm) on checked-here inputs: dx, dweight."""
    s = NormInputs(op, tensors, True)
    eps = _eps(context)
    x, w, dy = S.to_device(s.x), S.to_device(s.weight), S.to_device(s.dy)
    dx = S.poisoned(s.x.shape, torch.bfloat16)
    dweight = S.poisoned(s.weight.shape, torch.bfloat16)
    rstd = S.poisoned([s.rows], torch.float32)
    if s.rows > 0:
        S.launch(rms_norm_bwd_kernel, (S.cdiv(s.rows, ROWS),), x, w, dy, dx, rstd, s.rows, s.width,
                 float(s.width), eps, ROWS=ROWS, CHUNK=CHUNK, BLOCK_W=BLOCK_W, num_warps=1)
    if s.width > 0:  # also with no rows: dweight is then +0
        S.launch(rms_norm_dweight_kernel, (S.cdiv(s.width, DW_COLS),), S.pointer_arg(dy), S.pointer_arg(x),
                 S.pointer_arg(rstd), dweight, s.rows, s.width, DW_COLS=DW_COLS, DW_UNROLL=DW_UNROLL, num_warps=1)
    return {"dx": S.to_host(dx), "dweight": S.to_host(dweight)}


FORWARD_KERNELS = [rms_norm_fwd_kernel]
BACKWARD_KERNELS = [rms_norm_bwd_kernel, rms_norm_dweight_kernel]


def forward(tensors, context):
    return forward_of(OP, tensors, context)


def backward(tensors, context):
    return backward_of(OP, tensors, context)


KERNELS = S.kernel_entries(OP, forward=(FORWARD_KERNELS, forward), backward=(BACKWARD_KERNELS, backward))
