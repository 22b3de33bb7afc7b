#!/usr/bin/env python3
"""The real workload (fixtures/ws1-qwen3-8b-dense.json, Qwen3-8B widths) end to end on
cpu_bf16: every accuracy fixture, both directions, and every invariance transform. Suite `long`
(tens of minutes on 2 cores; outside CI: `meson test -C build --suite long`). The accuracy run is
expected to be green in every cell (det_gemm's Option B cells, red before decision D11 chose
Option A, included); any red cell fails the test.

Usage: long_test.py WS1CHECK SOURCE_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile

KNOWN_RED = set()


def run(ws1check, root, out, *args):
    p = subprocess.run([ws1check, *args, "--backend", "cpu_bf16", "--workload",
                        os.path.join(root, "fixtures", "ws1-qwen3-8b-dense.json"), "--out", out],
                       capture_output=True, text=True, cwd=root)
    return p.returncode, p.stderr


def main():
    # Absolute: the runs below change into the source tree, and meson may pass a relative path.
    ws1check, root = os.path.abspath(sys.argv[1]), sys.argv[2]
    failures = []
    with tempfile.TemporaryDirectory() as d:
        rc, err = run(ws1check, root, d, "accuracy", "--op", "all", "--direction", "both", "--tier", "all")
        acc = json.load(open(os.path.join(d, "accuracy-cpu_bf16.json")))
        red = {c["id"] for c in acc["cells"] if c["verdict"] == "red"}
        na = [c for c in acc["cells"] if c["verdict"] == "na" and not c.get("reason")]
        if rc != 1 or red != KNOWN_RED or na:
            failures.append(f"accuracy: exit {rc}, red {sorted(red ^ KNOWN_RED)} differ from D11, "
                            f"{len(na)} N/A without reason\n{err[-2000:]}")
        print(f"accuracy: {acc['summary']}")
        rc, err = run(ws1check, root, d, "invariance", "--op", "all", "--transform", "all", "--direction", "both")
        inv = json.load(open(os.path.join(d, "invariance-cpu_bf16.json")))
        if rc != 0 or inv["summary"]["red"] != 0 or inv["summary"]["green"] < 150:
            failures.append(f"invariance: exit {rc}, summary {inv['summary']}\n{err[-2000:]}")
        print(f"invariance: {inv['summary']}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
