#!/usr/bin/env python3
"""Planted faulty ws1-exec-v1 workers built on the minimal example (docs/examples/
exec_worker_silu.py): the protocol is right, the outputs are not (test/backend/exec_cli_test.py).
  wrong_shape   y loses its last row           -> red: shape differs from the reference
  nan           y[0, 0] is NaN                 -> red: NaN, never green
  wrong_dtype   y is float32, not bf16         -> red: dtype
  tf32          the readback says TF32 is on   -> red: TF32 on the candidate path
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "docs", "examples"))
import exec_worker_silu as worker  # noqa: E402

KERNEL, silu = worker.OPS[("silu", "forward")]


def wrong_shape(tensors, context):
    return {"y": ("BF16", silu(tensors, context)["y"][1][:-1])}


def nan(tensors, context):
    y = silu(tensors, context)["y"][1].copy()
    y.flat[0] = 0x7FC0
    return {"y": ("BF16", y)}


def wrong_dtype(tensors, context):
    return {"y": ("F32", worker.bf16_to_f32(silu(tensors, context)["y"][1]))}


mode = sys.argv[1]
if mode == "tf32":
    worker.READBACK = dict(worker.READBACK, tf32_enabled=True)
else:
    worker.OPS[("silu", "forward")] = (KERNEL, {"wrong_shape": wrong_shape, "nan": nan, "wrong_dtype": wrong_dtype}[mode])
sys.exit(worker.main())
