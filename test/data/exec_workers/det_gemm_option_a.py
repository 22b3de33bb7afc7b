#!/usr/bin/env python3
"""A numpy ws1-exec-v1 worker serving det_gemm (forward and backward), for the audit's Option A
probe over the protocol (test/cli/audit_test.py):
  faithful   each of the k_shards contiguous K shards summed exactly (float64, exact on the
             probe's integer sums) and rounded to FP32, the FP32 partials added in shard order,
             rounded once to bf16; da and db one sum each, rounded once   -> the probe's option_a
  rounded    the same, but each shard's partial rounded to bf16 before the sum (the planted
             defect of issue 16)                                          -> neither order
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "docs", "examples"))
import exec_worker_silu as worker  # noqa: E402

MODE = sys.argv[1]
assert MODE in ("faithful", "rounded"), MODE
f32, bf16 = worker.bf16_to_f32, worker.f32_to_bf16


def shard_bounds(k, shards):
    step = -(-k // shards)
    return [(min(r * step, k), min((r + 1) * step, k)) for r in range(shards)]


def forward(tensors, context):
    if context.get("k_partial"):
        raise ValueError("k_partial is not served by this worker")
    a, b = f32(tensors["a"][1]).astype(np.float64), f32(tensors["b"][1]).astype(np.float64)
    total = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for lo, hi in shard_bounds(a.shape[1], max(1, int(context.get("k_shards", 1)))):
        part = (a[:, lo:hi] @ b[lo:hi, :]).astype(np.float32)
        if MODE == "rounded":
            part = f32(bf16(part))
        total = (total + part).astype(np.float32)
    return {"c": ("BF16", bf16(total))}


def backward(tensors, context):
    a, b = f32(tensors["a"][1]).astype(np.float64), f32(tensors["b"][1]).astype(np.float64)
    dy = f32(tensors["dy.c"][1]).astype(np.float64)
    return {"da": ("BF16", bf16((dy @ b.T).astype(np.float32))),
            "db": ("BF16", bf16((a.T @ dy).astype(np.float32)))}


worker.OPS = {("det_gemm", "forward"): (f"planted_numpy.det_gemm.forward.{MODE}", forward),
              ("det_gemm", "backward"): (f"planted_numpy.det_gemm.backward.{MODE}", backward)}
sys.exit(worker.main())
