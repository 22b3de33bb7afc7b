"""swiglu on triton_cuda_bf16 (lib/ops/swiglu.cpp states the definition): y = silu(gate) * up,
elementwise over same-shape gate and up.

One kernel per direction over the flattened tensors, BLOCK elements per program (_pointwise.py
holds the launch, the flat block, and silu and its derivative); the backward writes dgate and
dup from one pass. Per element, in FP32, with the cuda_bf16 kernel's operations in its order,
each rounded once (fusion off, _support.launch):
    forward   s = 1 / (1 + exp(-g));  y = (g * s) * u
    backward  dgate = (dy * u) * (s * (1 + g * (1 - s)));  dup = dy * (g * s)
and one bf16 rounding (nearest even) per output; silu(gate) is never rounded on the way. exp is
libdevice's expf (CUDA's IEEE-mode expf, subnormals kept: reflect-ftz is off for every launch),
the division tl.div_rn. No reduction: nothing depends on the grid or the call's size; identical
bits run to run.
"""
import os
import sys

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _pointwise as P  # noqa: E402
import _support as S  # noqa: E402
from _pointwise import block_elements, load_f32, silu_f32, silu_grad_f32  # noqa: E402

OP = "swiglu"


@triton.jit
def swiglu_fwd_kernel(g_ptr, u_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs, m = block_elements(n, BLOCK)
    g = load_f32(g_ptr, offs, m)
    u = load_f32(u_ptr, offs, m)
    tl.store(y_ptr + offs, (silu_f32(g) * u).to(tl.bfloat16), mask=m)


@triton.jit
def swiglu_bwd_kernel(g_ptr, u_ptr, dy_ptr, dg_ptr, du_ptr, n, BLOCK: tl.constexpr):
    offs, m = block_elements(n, BLOCK)
    g = load_f32(g_ptr, offs, m)
    u = load_f32(u_ptr, offs, m)
    dy = load_f32(dy_ptr, offs, m)
    dgate = (dy * u) * silu_grad_f32(g)
    dup = dy * silu_f32(g)  # both helpers compute s from the same g: the same bits (CSE merges them)
    tl.store(dg_ptr + offs, dgate.to(tl.bfloat16), mask=m)
    tl.store(du_ptr + offs, dup.to(tl.bfloat16), mask=m)


def forward(tensors, context):
    return P.elementwise(OP, swiglu_fwd_kernel, tensors, ["gate", "up"], ["y"])


def backward(tensors, context):
    return P.elementwise(OP, swiglu_bwd_kernel, tensors, ["gate", "up", "dy.y"], ["dgate", "dup"])


KERNELS = S.kernel_entries(OP, forward=([swiglu_fwd_kernel], forward),
                           backward=([swiglu_bwd_kernel], backward))
