"""pack on triton_cuda_bf16 (lib/ops/pack.cpp states the definition): varlen packing, a layout
helper with no arithmetic.
    (x [B, S, *tail] bf16, mask [B, S] bool) -> packed [A, *tail], cu_seqlens [B+1] int64
A = the number of true mask entries; the active rows keep row-major (b, s) order;
cu_seqlens[0] = 0, cu_seqlens[b+1] = cu_seqlens[b] + (active rows of sequence b). x [T, *tail]
with mask [T] is one sequence. Backward: dx has x's shape, dy.packed's rows go back to the
active rows in the same order, every inactive row is +0.

The mask's shape and bytes (0 or 1) are checked on the host, as pack_inputs() does. Then:
  pack_scan_kernel   one program walks the sequences in order and each sequence in BLOCK-wide
                     pieces: an inclusive integer prefix sum of the piece's mask bits gives
                     each active row its packed index dest[k] (-1 for inactive rows), and the
                     running count after sequence b is cu_seqlens[b+1]. Integer sums are exact,
                     so the result is the host scan of cuda_bf16 exactly; A = cu_seqlens[B] is
                     read back to size the output.
  pack_scatter_kernel   forward, grid (row of x, column tile): packed row dest[k] = x row k
                     for the active rows; dest is a bijection onto [0, A), so every packed
                     element is written exactly once.
  pack_unpack_kernel    backward, grid (row of x, column tile): dx row k = dy.packed row dest[k],
                     or +0 where dest[k] < 0; every dx element is written once, no zero fill.
The copies move int16 views of the bf16 tensors: bit copies, exact, and no value depends on the
grid, so identical bits run to run.
"""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _support as S  # noqa: E402

OP = "pack"
SCAN_BLOCK = 1024
BLOCK_W = 1024


@triton.jit
def pack_scan_kernel(mask_ptr, dest_ptr, cu_ptr, seqs, length, SCAN_BLOCK: tl.constexpr):
    count = tl.program_id(0).to(tl.int64) * 0  # an int64 scalar: active rows so far
    tl.store(cu_ptr, count)
    for b in range(0, seqs):
        for s0 in range(0, length, SCAN_BLOCK):
            s = s0 + tl.arange(0, SCAN_BLOCK)
            m = s < length
            k = b.to(tl.int64) * length + s
            act = tl.load(mask_ptr + k, mask=m, other=0).to(tl.int64)
            incl = tl.cumsum(act, axis=0)
            tl.store(dest_ptr + k, tl.where(act != 0, count + incl - 1, -1), mask=m)
            count = count + tl.sum(act, axis=0)
        tl.store(cu_ptr + b + 1, count)


@triton.jit
def pack_scatter_kernel(x_ptr, dest_ptr, packed_ptr, width, BLOCK_W: tl.constexpr):
    k = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_W + tl.arange(0, BLOCK_W)
    d = tl.load(dest_ptr + k)
    m = (cols < width) & (d >= 0)
    v = tl.load(x_ptr + k * width + cols, mask=m)
    tl.store(packed_ptr + d * width + cols, v, mask=m)


@triton.jit
def pack_unpack_kernel(dy_ptr, dest_ptr, dx_ptr, width, BLOCK_W: tl.constexpr):
    k = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_W + tl.arange(0, BLOCK_W)
    d = tl.load(dest_ptr + k)
    cm = cols < width
    v = tl.load(dy_ptr + d * width + cols, mask=cm & (d >= 0), other=0)
    tl.store(dx_ptr + k * width + cols, v, mask=cm)


class Packing:
    """The checked x and mask, the packed index of every row (device) and cu_seqlens."""

    def __init__(self, tensors):
        self.x = S.bf16_input(tensors, OP, "x")
        mask = S.tensor_input(tensors, OP, "mask", torch.bool)
        r = mask.dim()
        S.require(r in (1, 2), OP, "mask", f"shape {S.shape_string(mask.shape)} (expected [B, S] or [T])")
        xs = [int(d) for d in self.x.shape]
        S.require(len(xs) >= r and xs[:r] == [int(d) for d in mask.shape], OP, "mask",
                  f"shape {S.shape_string(mask.shape)} is not the leading dimensions of x {S.shape_string(xs)}")
        bits = mask.contiguous().view(torch.uint8).reshape(-1)
        bad = torch.nonzero(bits > 1)
        if bad.numel() > 0:
            k = int(bad[0, 0])
            raise S.OpInputError(f"{OP}: mask: element {k} holds byte {int(bits[k])} (a bool must be 0 or 1)")
        self.tail = xs[r:]
        self.width = 1
        for d in self.tail:
            self.width *= d
        self.seqs = int(mask.shape[0]) if r == 2 else 1
        length = int(mask.shape[-1])
        self.rows = self.seqs * length
        self.dest = S.poisoned([self.rows], torch.int64)
        cu = S.poisoned([self.seqs + 1], torch.int64)
        S.launch(pack_scan_kernel, (1,), S.pointer_arg(S.to_device(bits)), S.pointer_arg(self.dest), cu,
                 self.seqs, length, SCAN_BLOCK=SCAN_BLOCK)
        self.cu_seqlens = S.to_host(cu)
        self.active = int(self.cu_seqlens[-1])
        self.packed_shape = [self.active] + self.tail


def forward(tensors, context):
    p = Packing(tensors)
    packed = S.poisoned(p.packed_shape, torch.bfloat16)
    if p.rows > 0 and p.width > 0 and p.active > 0:
        x = S.to_device(p.x).view(torch.int16)
        S.launch(pack_scatter_kernel, (p.rows, S.cdiv(p.width, BLOCK_W)), x, p.dest, packed.view(torch.int16),
                 p.width, BLOCK_W=BLOCK_W)
    return {"packed": S.to_host(packed), "cu_seqlens": p.cu_seqlens}


def backward(tensors, context):
    p = Packing(tensors)
    dy = S.bf16_input(tensors, OP, "dy.packed")
    S.require(list(dy.shape) == p.packed_shape, OP, "dy.packed",
              f"shape {S.shape_string(dy.shape)} (expected {S.shape_string(p.packed_shape)}: the active rows of x)")
    dx = S.poisoned(p.x.shape, torch.bfloat16)
    if p.rows > 0 and p.width > 0:
        dyd = S.pointer_arg(S.to_device(dy).view(torch.int16))
        S.launch(pack_unpack_kernel, (p.rows, S.cdiv(p.width, BLOCK_W)), dyd, p.dest, dx.view(torch.int16),
                 p.width, BLOCK_W=BLOCK_W)
    return {"dx": S.to_host(dx)}


KERNELS = S.kernel_entries(OP, forward=([pack_scan_kernel, pack_scatter_kernel], forward),
                           backward=([pack_scan_kernel, pack_unpack_kernel], backward))
