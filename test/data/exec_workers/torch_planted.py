#!/usr/bin/env python3
"""rms_norm served through ws1check.serve (python/ws1check), faithful and planted
(test/backend/torch_worker_test.py):
  faithful  FP32 math with the context's eps, one rounding to bf16  -> green
  eps       the same with eps hard-coded to 1e-5 (Qwen3's is 1e-6)  -> red where x is near zero
  raises    forward faithful; backward raises                       -> the backward cells red, naming
                                                                        the error; the worker serves on
  untyped   forward returns a tensor, not a dict by output name     -> red, naming the rule
"""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "python"))
import ws1check  # noqa: E402

import torch  # noqa: E402

mode = sys.argv[1]


def rms_norm(t, eps):
    x, w = t["x"].float(), t["weight"].float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w).to(torch.bfloat16)


def forward(t, ctx):
    y = rms_norm(t, 1e-5 if mode == "eps" else ctx["rms_norm_eps"])
    return y if mode == "untyped" else {"y": y}


def backward(t, ctx):
    raise RuntimeError("planted: no backward kernel yet")


ops = {"rms_norm": {"forward": forward}}
if mode == "raises":
    ops["rms_norm"]["backward"] = backward
sys.exit(ws1check.serve(ops, backend="torch_planted_" + mode, device="cpu"))
