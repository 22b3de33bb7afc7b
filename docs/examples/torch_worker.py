#!/usr/bin/env python3
"""PyTorch's own rms_norm and scaled-dot-product attention, served to ws1check (python/ws1check):

    ws1check accuracy --op rms_norm --backend "exec:python3 docs/examples/torch_worker.py"
    ws1check accuracy --op attention --backend "exec:python3 docs/examples/torch_worker.py"

(with ws1check installed, PYTHONPATH=<prefix>/share/ws1check/python.) Inputs come as bf16 torch
tensors on the device (a GPU where torch sees one); each function computes in FP32 and rounds
its outputs to bf16 once, as the standard's candidates do. F.rms_norm (torch >= 2.4) and
F.scaled_dot_product_attention (torch >= 2.0) are used where this torch has them, else the
same formulas written out. The backward is torch.autograd through the same forward.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import ws1check  # noqa: E402  (before torch: serve() keeps stdout for the protocol)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

BF16 = torch.bfloat16


def rms_norm(x, weight, eps):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def attention(q, k, v, key_mask):
    """q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D], key_mask [B, Skv] (true: valid): causal with
    the mask's diagonal at the bottom right (query i sees keys j <= i + Skv - Sq); a query that
    sees no key gets 0."""
    group, sq, skv = q.shape[1] // k.shape[1], q.shape[2], k.shape[2]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    i = torch.arange(sq, device=q.device)[:, None]
    j = torch.arange(skv, device=q.device)[None, :]
    allowed = (j <= i + (skv - sq))[None, None] & key_mask[:, None, None, :]
    if hasattr(F, "scaled_dot_product_attention"):
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    else:
        s = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
        o = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1) @ v
    return torch.where(allowed.any(-1, keepdim=True), o, torch.zeros_like(o))  # NaN rows: no key seen


def fp32(t, names):
    return [t[n].float() for n in names]


def rms_norm_forward(t, ctx):
    x, w = fp32(t, ("x", "weight"))
    return {"y": rms_norm(x, w, ctx["rms_norm_eps"]).to(BF16)}


def rms_norm_backward(t, ctx):
    x, w = (a.requires_grad_() for a in fp32(t, ("x", "weight")))
    dx, dw = torch.autograd.grad(rms_norm(x, w, ctx["rms_norm_eps"]), (x, w), t["dy.y"].float())
    return {"dx": dx.to(BF16), "dweight": dw.to(BF16)}


def mask_of(t):
    q, k = t["q"], t["k"]
    return t["key_mask"] if "key_mask" in t else torch.ones(q.shape[0], k.shape[2], dtype=torch.bool, device=q.device)


def attention_forward(t, ctx):
    q, k, v = fp32(t, ("q", "k", "v"))
    return {"o": attention(q, k, v, mask_of(t)).to(BF16)}


def attention_backward(t, ctx):
    q, k, v = (a.requires_grad_() for a in fp32(t, ("q", "k", "v")))
    grads = torch.autograd.grad(attention(q, k, v, mask_of(t)), (q, k, v), t["dy.o"].float())
    return {name: g.to(BF16) for name, g in zip(("dq", "dk", "dv"), grads)}


if __name__ == "__main__":
    sys.exit(ws1check.serve({
        "rms_norm": {"forward": rms_norm_forward, "backward": rms_norm_backward},
        "attention": {"forward": attention_forward, "backward": attention_backward},
    }, backend="torch_example"))
