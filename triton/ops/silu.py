"""silu on triton_cuda_bf16 (lib/ops/silu.cpp states the definition): y = x * sigmoid(x),
elementwise, any shape.

One kernel per direction over the flattened tensor, BLOCK elements per program (_pointwise.py
holds the launch, the flat block, and silu and its derivative). Per element, in FP32, with the
cuda_bf16 kernel's operations in its order, each rounded once (fusion off, _support.launch):
    forward   s = 1 / (1 + exp(-x));  y  = x * s
    backward  dx = dy * (s * (1 + x * (1 - s)))
and one bf16 rounding (nearest even) of the result. exp is libdevice's expf (CUDA's IEEE-mode
expf, as cuda_bf16 uses, keeping subnormals: reflect-ftz is off for every launch; tl.exp
would be the ex2.approx path) and the division is tl.div_rn.
No reduction: every element is its own fixed expression, so nothing depends on the grid, the
element's position or the call's size; identical bits run to run.
"""
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _pointwise as P  # noqa: E402
import _support as S  # noqa: E402
from _pointwise import block_elements, load_f32, silu_f32, silu_grad_f32  # noqa: E402

OP = "silu"


@triton.jit
def silu_fwd_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs, m = block_elements(n, BLOCK)
    x = load_f32(x_ptr, offs, m)
    tl.store(y_ptr + offs, silu_f32(x).to(tl.bfloat16), mask=m)


@triton.jit
def silu_bwd_kernel(x_ptr, dy_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    offs, m = block_elements(n, BLOCK)
    x = load_f32(x_ptr, offs, m)
    dy = load_f32(dy_ptr, offs, m)
    tl.store(dx_ptr + offs, (dy * silu_grad_f32(x)).to(tl.bfloat16), mask=m)


def forward(tensors, context):
    return P.elementwise(OP, silu_fwd_kernel, tensors, ["x"], ["y"])


def backward(tensors, context):
    return P.elementwise(OP, silu_bwd_kernel, tensors, ["x", "dy.y"], ["dx"])


KERNELS = S.kernel_entries(OP, forward=([silu_fwd_kernel], forward), backward=([silu_bwd_kernel], backward))
