"""What the elementwise Triton ops share (silu, swiglu): the flat block of elements a program
owns, the bf16 load widened to float32, silu and its derivative in float32, and the host side
that checks same-shape bf16 inputs and launches one kernel over the flattened tensors.

The worker skips files starting with "_"; op modules import this one next to _support:

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _pointwise as P
    from _pointwise import block_elements, load_f32, silu_f32, silu_grad_f32   # in kernels

Kernel contract for elementwise(): kernel(<inputs...>, <outputs...>, n, BLOCK), every pointer
a flat contiguous bf16 tensor of n elements, BLOCK elements per program.
"""
import os
import sys

import triton
import triton.language as tl
from triton.language.extra import libdevice

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _support as S  # noqa: E402

BLOCK = 1024  # elements per program


@triton.jit
def block_elements(n, BLOCK: tl.constexpr):
    """This program's BLOCK flat element offsets (int64, so n may pass 2^31) and the mask of
    those below n."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    return offs, offs < n


@triton.jit
def load_f32(ptr, offs, m):
    """The bf16 elements at offs widened to float32 (exact); masked-off lanes read 0.0."""
    return tl.load(ptr + offs, mask=m, other=0.0).to(tl.float32)


@triton.jit
def sigmoid(x):
    """s = 1 / (1 + exp(-x)) in float32: libdevice's expf (IEEE-mode, as cuda_bf16; tl.exp would
    be the ex2.approx path) and an IEEE division, each operation rounded once (fusion off)."""
    return tl.div_rn(1.0, 1.0 + libdevice.exp(-x))


@triton.jit
def silu_f32(x):
    """silu(x) = x * s in float32, never rounded to bf16 on the way (swiglu multiplies it by up)."""
    return x * sigmoid(x)


@triton.jit
def silu_grad_f32(x):
    """d silu / dx = s * (1 + x * (1 - s)) in float32, in that order (cuda_bf16's)."""
    s = sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


def elementwise(op, kernel, tensors, inputs, outputs):
    """Checks the named inputs (the first bf16 of any shape, the others bf16 of exactly its
    shape, in that order, with lib/ops' messages), launches kernel over the flattened elements
    and returns {output name: CPU bf16 tensor of the first input's shape}."""
    first = S.bf16_input(tensors, op, inputs[0])
    checked = [first] + [S.like_input(tensors, op, name, first.shape) for name in inputs[1:]]
    on_device = [S.to_device(t) for t in checked]
    results = [S.poisoned(first.shape, first.dtype) for _ in outputs]  # every element is written
    n = on_device[0].numel()
    S.launch(kernel, (S.cdiv(n, BLOCK),), *on_device, *results, n, BLOCK=BLOCK)
    return {name: S.to_host(t) for name, t in zip(outputs, results)}
