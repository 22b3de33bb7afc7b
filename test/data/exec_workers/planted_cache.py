#!/usr/bin/env python3
"""ws1-exec-v1 workers with an input cache (python/ws1check/protocol.py serve, numpy silu of the minimal
example), faithful and planted (test/backend/exec_cli_test.py):
  faithful   keeps inputs by content key                      -> green, inputs named by key
  by_name    keeps the first tensor stored under each *name*,
             whatever its key                                 -> red: a stale input, wrong outputs
  forgetful  announces a cache and keeps nothing              -> red: no tensor kept under the key
"""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "docs", "examples"))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "python"))
import exec_worker_silu as example  # noqa: E402
from ws1check import protocol as ws1_exec  # noqa: E402


class ByName(ws1_exec.InputCache):
    def apply(self, request, tensors):
        request = dict(request)
        names = {**request.get("store", {}), **request.get("cached", {})}
        for name in names:  # key by name: a later tensor of the same name gets the first one's bytes
            if name in tensors and name not in self.held:
                self.held[name] = tensors[name]
            tensors[name] = self.held[name]
        return tensors


class Forgetful(ws1_exec.InputCache):
    def apply(self, request, tensors):
        return super().apply(dict(request, store={}), tensors)


mode = sys.argv[1]
if mode == "by_name":
    ws1_exec.InputCache = ByName
elif mode == "forgetful":
    ws1_exec.InputCache = Forgetful
channel = ws1_exec.take_stdout()
sys.exit(ws1_exec.serve(channel, "example_numpy", example.OPS, lambda: example.READBACK, ws1_exec.TensorIO(None),
                        cache_bytes=1 << 30))
