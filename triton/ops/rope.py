"""rope on triton_cuda_bf16 (lib/ops/rope.cpp states the definition): rotary position
embedding, GPT-NeoX "rotate half" pairs (i, i + D/2); token-major x [T, H, D] with positions
[T], or head-major x [B, H, S, D] with positions [S] or [B, S]. Positions int64 in [0, 2^29).

As cuda/ops/rope.cu, two kernels per direction:
  host           inv_freq[i] = the float32 rounding of the float64 1/theta^(2i/D) (Python's
                 float arithmetic and math.pow are C doubles and the C library's pow, as the
                 C++ side's std::pow), computed once per call like rope_inputs() does.
  rope_table_kernel   cos/sin per (position slot k, i < D/2): the angle positions[k] *
                 inv_freq[i] formed exactly in float64 (a position < 2^29 times a float32 has
                 at most 53 significant bits; decision D10), cos and sin in float64
                 (libdevice __nv_cos / __nv_sin), each rounded once to float32.
  rope_rotate_kernel  per (row, i), with explicit fma (fusion off otherwise):
                     forward   y[i]    = fma(x[i],   c, -(x[i+h] * s))
                               y[i+h]  = fma(x[i+h], c,   x[i]   * s)
                     backward  dx[i]   = fma(dy[i],   c,   dy[i+h] * s)
                               dx[i+h] = fma(dy[i+h], c, -(dy[i]   * s))
                 (the CPU's sign * (...) with sign -1 in the backward, which is the same
                 value), rounded to bf16 once.
No reduction: every element is its own fixed FP32 expression of its row, its position's table
entry and nothing else, so nothing depends on the grid, the row count or the row's place in
the call; identical bits run to run.
"""
import math
import os
import sys

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _support as S  # noqa: E402

OP = "rope"
BLOCK = 1024
POSITION_LIMIT = 1 << 29
TOKEN_MAJOR, HEAD_MAJOR, HEAD_MAJOR_BATCHED = 0, 1, 2


@triton.jit
def rope_table_kernel(pos_ptr, inv_freq_ptr, cos_ptr, sin_ptr, total, half, BLOCK: tl.constexpr):
    e = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = e < total
    k = e // half
    i = e - k * half
    p = tl.load(pos_ptr + k, mask=m, other=0)
    f = tl.load(inv_freq_ptr + i, mask=m, other=0.0)
    angle = p.to(tl.float64) * f.to(tl.float64)  # exact
    tl.store(cos_ptr + e, libdevice.cos(angle).to(tl.float32), mask=m)
    tl.store(sin_ptr + e, libdevice.sin(angle).to(tl.float32), mask=m)


@triton.jit
def rope_rotate_kernel(v_ptr, cos_ptr, sin_ptr, out_ptr, total, half, dim, heads, seq,
                       LAYOUT: tl.constexpr, BACKWARD: tl.constexpr, BLOCK: tl.constexpr):
    e = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = e < total  # total = rows * half
    row = e // half
    i = e - row * half
    if LAYOUT == 0:  # token-major: row = t*H + h
        slot = row // heads
    elif LAYOUT == 1:  # head-major, positions [S]: row = (b*H + h)*S + s
        slot = row % seq
    else:  # head-major, positions [B, S]
        slot = (row // (heads * seq)) * seq + row % seq
    t = slot * half + i
    o = row * dim + i
    lo = tl.load(v_ptr + o, mask=m, other=0.0).to(tl.float32)
    hi = tl.load(v_ptr + o + half, mask=m, other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + t, mask=m, other=0.0)
    s = tl.load(sin_ptr + t, mask=m, other=0.0)
    if BACKWARD:
        out_lo = tl.fma(lo, c, hi * s)
        out_hi = tl.fma(hi, c, -(lo * s))
    else:
        out_lo = tl.fma(lo, c, -(hi * s))
        out_hi = tl.fma(hi, c, lo * s)
    tl.store(out_ptr + o, out_lo.to(tl.bfloat16), mask=m)
    tl.store(out_ptr + o + half, out_hi.to(tl.bfloat16), mask=m)


class RopeInputs:
    """A checked call, as lib/ops' rope_inputs (messages included)."""

    def __init__(self, tensors, context, backward):
        src = "dy.y" if backward else "x"
        pos = S.tensor_input(tensors, OP, "positions", torch.int64)
        self.v = S.bf16_input(tensors, OP, src)
        v = self.v
        S.require(v.dim() in (3, 4), OP, src, f"shape {S.shape_string(v.shape)} (expected [T, H, D] or [B, H, S, D])")
        self.dim = int(v.shape[-1])
        S.require(self.dim > 0 and self.dim % 2 == 0, OP, src,
                  f"shape {S.shape_string(v.shape)}: head_dim must be even and positive")
        head_dim = int(context.get("head_dim", 0) or 0)
        S.require(head_dim <= 0 or self.dim == head_dim, OP, src,
                  f"shape {S.shape_string(v.shape)}: last dimension is not head_dim {head_dim}")
        self.rows = v.numel() // self.dim
        xs, ps = [int(d) for d in v.shape], [int(d) for d in pos.shape]
        self.heads, self.seq = xs[1], 1
        if v.dim() == 3:
            self.layout = TOKEN_MAJOR
            S.require(pos.dim() == 1 and ps[0] == xs[0], OP, "positions",
                      f"shape {S.shape_string(ps)} (expected [{xs[0]}] for x {S.shape_string(xs)})")
        else:
            self.seq = xs[2]
            self.layout = HEAD_MAJOR_BATCHED if pos.dim() == 2 else HEAD_MAJOR
            S.require((pos.dim() == 1 and ps[0] == xs[2]) or (pos.dim() == 2 and ps == [xs[0], xs[2]]),
                      OP, "positions",
                      f"shape {S.shape_string(ps)} (expected [{xs[2]}] or [{xs[0]}, {xs[2]}] for x {S.shape_string(xs)})")
        x = tensors.get("x")
        if backward and x is not None:
            S.require(list(x.shape) == xs, OP, src,
                      f"shape {S.shape_string(xs)} differs from x {S.shape_string(x.shape)}")
        theta = float(context.get("rope_theta", 0.0))
        S.require(math.isfinite(theta) and theta > 1.0, OP, "rope_theta", f"{theta} is not a finite value above 1")
        half = self.dim // 2
        self.inv_freq = [S.f32(1.0 / math.pow(theta, float(2 * i) / float(self.dim))) for i in range(half)]
        self.positions = pos.reshape(-1)
        bad = torch.nonzero((self.positions < 0) | (self.positions >= POSITION_LIMIT))
        if bad.numel() > 0:
            k = int(bad[0, 0])
            raise S.OpInputError(f"{OP}: positions: positions[{k}] = {int(self.positions[k])} is outside [0, 2^29)")


def run(tensors, context, backward):
    r = RopeInputs(tensors, context, backward)
    half = r.dim // 2
    slots = r.positions.numel()
    out = S.poisoned(r.v.shape, torch.bfloat16)
    if r.rows == 0 or slots * half == 0:
        return out
    positions = S.to_device(r.positions)
    inv_freq = S.to_device(torch.tensor(r.inv_freq, dtype=torch.float32))  # exact: values are float32 already
    cos_t = S.poisoned([slots * half], torch.float32)
    sin_t = S.poisoned([slots * half], torch.float32)
    S.launch(rope_table_kernel, (S.cdiv(slots * half, BLOCK),), positions, inv_freq, cos_t, sin_t,
             slots * half, half, BLOCK=BLOCK)
    v = S.to_device(r.v)
    total = r.rows * half
    S.launch(rope_rotate_kernel, (S.cdiv(total, BLOCK),), v, cos_t, sin_t, out, total, half, r.dim,
             r.heads, r.seq, LAYOUT=r.layout, BACKWARD=backward, BLOCK=BLOCK)
    return out


def forward(tensors, context):
    return {"y": S.to_host(run(tensors, context, False))}


def backward(tensors, context):
    return {"dx": S.to_host(run(tensors, context, True))}


KERNELS = S.kernel_entries(OP, forward=([rope_table_kernel, rope_rotate_kernel], forward),
                           backward=([rope_table_kernel, rope_rotate_kernel], backward))
