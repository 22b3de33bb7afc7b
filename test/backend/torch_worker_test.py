#!/usr/bin/env python3
"""PyTorch callables served with ws1check.serve (python/ws1check, docs/external-backend.md §7),
on the CPU with Debian's python3-torch: the example worker (PyTorch's rms_norm and attention,
forward and backward by autograd) is green in every accuracy cell it can be judged in, and
bit-invariant; the planted workers of test/data/exec_workers/torch_planted.py are red where
they are wrong, each with its reason; serve() refuses a malformed op table at once.

Usage: torch_worker_test.py WS1CHECK SOURCE_ROOT (skipped, exit 77, where torch is not
importable: tools/setup.sh --tests installs it).
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

try:
    import torch  # noqa: F401
except ImportError:
    print("skipped: torch is not importable by", sys.executable, file=sys.stderr)
    sys.exit(77)

WS1CHECK = None
ROOT = None
PY = shlex.quote(sys.executable)


def src(*parts):
    return os.path.join(ROOT, *parts)


def run(command, backend, *args):
    """ws1check COMMAND on the smoke workload with an exec backend; (rc, stdout, stderr, evidence)."""
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run([WS1CHECK, command, "--workload", src("fixtures/ws1-smoke.json"), "--out", out,
                            "--backend", backend, *args], capture_output=True, text=True, cwd=ROOT, timeout=600)
        files = [f for f in os.listdir(out) if f.endswith(".json") and f.startswith(command)]
        evidence = None
        if len(files) == 1:
            with open(os.path.join(out, files[0])) as f:
                evidence = json.load(f)
        return p.returncode, p.stdout, p.stderr, evidence


def example():
    return f"exec:{PY} {shlex.quote(src('docs/examples/torch_worker.py'))}"


def planted(mode):
    return f"exec:{PY} {shlex.quote(src('test/data/exec_workers/torch_planted.py'))} {mode}"


def verdicts(evidence):
    return {c["id"]: c["verdict"] for c in evidence["cells"]}


class TorchWorkerTest(unittest.TestCase):
    def test_example_is_green_forward_and_backward(self):
        for op in ("rms_norm", "attention"):
            with self.subTest(op=op):
                rc, out, err, ev = run("accuracy", example(), "--op", op, "--direction", "both")
                self.assertEqual(rc, 0, err)
                v = verdicts(ev)
                self.assertGreaterEqual(len(v), 10)
                self.assertEqual({k for k, x in v.items() if x not in ("green", "vacuous")}, set())
                self.assertGreater(sum(x == "green" for x in v.values()), 8)
                self.assertTrue(all(k.startswith("torch_example/") for k in v))
                kernel_ids = {c["kernel_id"] for c in ev["cells"]}
                self.assertIn(f"torch_example.{op}.forward:__main__.{op}_forward on cpu", {k.split(" (")[0] for k in kernel_ids})

    def test_example_is_bit_invariant(self):
        rc, out, err, ev = run("invariance", example(), "--op", "rms_norm", "--direction", "both")
        self.assertEqual(rc, 0, err)
        v = verdicts(ev)
        self.assertGreater(sum(x == "green" for x in v.values()), 20)
        self.assertNotIn("red", v.values())

    def test_hard_coded_eps_is_red_where_x_is_near_zero(self):
        rc, out, err, ev = run("accuracy", planted("eps"), "--op", "rms_norm")
        self.assertEqual(rc, 1, err)
        v = verdicts(ev)
        self.assertEqual(v["torch_planted_eps/forward_accuracy/rms_norm/primary/near_zero"], "red")
        self.assertEqual(v["torch_planted_eps/forward_accuracy/rms_norm/primary/normal"], "green")
        # Its faithful twin, the same code with the context's eps, is green there.
        rc, out, err, ev = run("accuracy", planted("faithful"), "--op", "rms_norm")
        self.assertEqual(rc, 0, err)
        self.assertEqual(set(verdicts(ev).values()), {"green"})

    def test_a_function_that_raises_is_its_cells_failure_and_serving_goes_on(self):
        rc, out, err, ev = run("accuracy", planted("raises"), "--op", "rms_norm", "--direction", "both")
        self.assertEqual(rc, 1, err)
        for cell in ev["cells"]:
            if "/gradient_accuracy/" in cell["id"]:
                self.assertEqual(cell["verdict"], "red")
                self.assertIn("RuntimeError: planted: no backward kernel yet", cell["reason"])
            else:
                self.assertEqual(cell["verdict"], "green", cell["id"])

    def test_an_output_that_is_not_a_dict_is_red_naming_the_rule(self):
        rc, out, err, ev = run("accuracy", planted("untyped"), "--op", "rms_norm", "--tier", "short")
        self.assertEqual(rc, 1, err)
        (cell,) = ev["cells"]
        self.assertEqual(cell["verdict"], "red")
        self.assertIn("not a dict of torch tensors by output name", cell["reason"])

    def test_a_malformed_op_table_is_refused_before_serving(self):
        code = ("import sys; sys.path.insert(0, sys.argv[1]); import ws1check; "
                "ws1check.serve({'rms_norm': {'forwards': lambda t, c: t}}, backend='x')")
        p = subprocess.run([sys.executable, "-c", code, src("python")], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=120)
        self.assertNotEqual(p.returncode, 0)
        self.assertEqual(p.stdout, "")
        self.assertIn("direction 'forwards' is not one of ('forward', 'backward')", p.stderr)


if __name__ == "__main__":
    WS1CHECK, ROOT = os.path.abspath(sys.argv.pop(1)), os.path.abspath(sys.argv.pop(1))
    unittest.main()
