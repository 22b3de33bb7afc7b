#!/usr/bin/env python3
"""The external-candidate protocol end to end (docs/external-backend.md), without a GPU:
`exec:ws1check worker` gives cpu_bf16's cells; the minimal numpy worker is green where it serves
and red where it does not; the triton worker whose kernels do not load (no Triton here) is red
"not provided"; each planted faulty worker of test/data/exec_workers fails exactly as the
protocol says (exit 3 at the handshake, a red cell after it), within its time-out, leaving no
process and no file behind.

Usage: exec_cli_test.py WS1CHECK SOURCE_ROOT
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from procs import alive  # noqa: E402

WS1CHECK = None
ROOT = None
PY = shlex.quote(sys.executable)


def src(*parts):
    return os.path.join(ROOT, *parts)


def has_numpy():
    return subprocess.run([sys.executable, "-c", "import numpy"], capture_output=True).returncode == 0


def planted(kind, mode):
    if kind == "sh":
        return f"exec:sh {shlex.quote(src('test/data/exec_workers/planted.sh'))} {mode}"
    return f"exec:{PY} {shlex.quote(src('test/data/exec_workers/planted.py'))} {mode}"


class Run:
    """One `ws1check accuracy` on the smoke workload, in a private TMPDIR and --out."""

    def __init__(self, backend, *args, timeout_s=None, env_extra=None):
        self.dir = tempfile.TemporaryDirectory()
        self.tmp = os.path.join(self.dir.name, "tmp")
        self.out = os.path.join(self.dir.name, "out")
        os.mkdir(self.tmp)
        env = dict(os.environ, TMPDIR=self.tmp)
        if timeout_s is not None:
            env["WS1CHECK_EXEC_TIMEOUT"] = str(timeout_s)
        env.update(env_extra or {})
        cmd = [WS1CHECK, "accuracy", "--workload", src("fixtures/ws1-smoke.json"), "--out", self.out,
               "--backend", backend, *args]
        start = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        self.seconds = time.monotonic() - start
        self.rc, self.stdout, self.stderr = p.returncode, p.stdout, p.stderr

    def evidence(self, backend):
        with open(os.path.join(self.out, f"accuracy-{backend}.json")) as f:
            return json.load(f)

    def leftovers(self):
        return os.listdir(self.tmp)

    def close(self):
        self.dir.cleanup()


class ThroughTheProtocol(unittest.TestCase):
    def test_ws1check_worker_gives_cpu_bf16_cells(self):
        worker = f"exec:{shlex.quote(WS1CHECK)} worker --backend cpu_bf16"
        direct = Run("cpu_bf16", "--op", "rms_norm", "--direction", "both")
        served = Run(worker, "--op", "rms_norm", "--direction", "both")
        try:
            self.assertEqual(served.rc, direct.rc, served.stderr)
            self.assertEqual(served.rc, 0, served.stderr)
            a, b = direct.evidence("cpu_bf16"), served.evidence("cpu_bf16")
            self.assertEqual(len(a["cells"]), len(b["cells"]))
            self.assertGreater(len(a["cells"]), 4)
            for x, y in zip(a["cells"], b["cells"]):
                self.assertEqual(x["id"], y["id"])
                self.assertEqual(x["verdict"], y["verdict"])
                self.assertEqual(x["tensors"], y["tensors"])  # same bits, same errors
                self.assertTrue(y["kernel_id"].startswith(x["kernel_id"] + " on cpu: "), y["kernel_id"])
            self.assertEqual(served.leftovers(), [])
        finally:
            direct.close()
            served.close()

    def test_ws1check_worker_refuses_external_backends(self):
        p = subprocess.run([WS1CHECK, "worker", "--backend", "exec:true"], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stdout, "")

    @unittest.skipUnless(has_numpy(), "numpy is not importable")
    def test_minimal_example_worker(self):
        worker = f"exec:{PY} {shlex.quote(src('docs/examples/exec_worker_silu.py'))}"
        r = Run(worker, "--op", "silu", "--direction", "both")
        try:
            self.assertEqual(r.rc, 1, r.stderr)
            cells = r.evidence("example_numpy")["cells"]
            fwd = [c for c in cells if c["judgment"] == "forward_accuracy"]
            bwd = [c for c in cells if c["judgment"] == "gradient_accuracy"]
            self.assertEqual(len(fwd), 5)
            # Green, except where an all-zero candidate passes the row as well (vacuous, D29).
            self.assertIn("green", {c["verdict"] for c in fwd})
            self.assertLessEqual({c["verdict"] for c in fwd}, {"green", "vacuous"})
            for c in fwd:
                if c["verdict"] == "vacuous":
                    self.assertTrue(c["reason"].startswith("vacuous: an all-zero candidate passes"), c["reason"])
            for c in fwd:
                self.assertEqual(c["kernel_id"], "example_numpy.silu.forward.v1 on cpu (numpy)")
                self.assertTrue(c["id"].startswith("example_numpy/forward_accuracy/silu/"))
            self.assertEqual({c["verdict"] for c in bwd}, {"red"})
            for c in bwd:
                self.assertEqual(c["reason"], "candidate failed: example_numpy: silu backward: not provided by the worker")
            self.assertEqual(r.leftovers(), [])
        finally:
            r.close()

    def test_triton_worker_whose_kernels_do_not_load_is_red_not_provided(self):
        # No Triton on this machine: triton/ops/*.py fail to import, the worker announces no op.
        worker = f"exec:{PY} {shlex.quote(src('triton/ws1_worker.py'))}"
        r = Run(worker, "--op", "rms_norm", "--tier", "short")
        try:
            self.assertEqual(r.rc, 1, r.stderr)
            (cell,) = r.evidence("triton_cuda_bf16")["cells"]
            self.assertEqual(cell["verdict"], "red")
            self.assertEqual(cell["reason"],
                             "candidate failed: triton_cuda_bf16: rms_norm forward: not provided by the worker")
            self.assertEqual(cell["kernel_id"], "none (not provided by the worker)")
        finally:
            r.close()

    def test_triton_profile_without_a_gpu_is_exit_3(self):
        env = json.loads(subprocess.run([WS1CHECK, "env", "--json"], capture_output=True, text=True,
                                        timeout=120).stdout)
        if env.get("environment", {}).get("gpu"):
            self.skipTest("a GPU is present")
        r = Run("triton_cuda_bf16", "--op", "silu", "--tier", "short")
        try:
            self.assertEqual(r.rc, 3, r.stderr)
            self.assertIn("needs a CUDA device", r.stderr)
        finally:
            r.close()


class AtTheHandshake(unittest.TestCase):
    """A worker that fails before serving: exit 3, one line on stderr, no evidence."""

    def expect_exit_3(self, backend, *fragments, timeout_s=None):
        r = Run(backend, "--op", "silu", "--tier", "short", timeout_s=timeout_s)
        try:
            self.assertEqual(r.rc, 3, r.stderr)
            self.assertEqual(r.stdout, "")
            lines = r.stderr.strip().splitlines()
            self.assertEqual(len([l for l in lines if l.startswith("ws1check: error:")]), 1, r.stderr)
            line = [l for l in lines if l.startswith("ws1check: error:")][0]
            self.assertIn("handshake failed: ", line)
            for f in fragments:
                self.assertIn(f, line)
            self.assertFalse(os.path.exists(r.out) and os.listdir(r.out), "evidence written")
            self.assertEqual(r.leftovers(), [])
            return r.seconds
        finally:
            r.close()

    def test_crash(self):
        self.expect_exit_3(planted("sh", "crash"), "exited with status 1",
                           'its stderr ends: "planted: cannot load libfoo.so: no such file"')

    def test_silent_worker_times_out(self):
        seconds = self.expect_exit_3(planted("sh", "silent"), "no hello within 1 s (WS1CHECK_EXEC_TIMEOUT)",
                                     timeout_s=1)
        self.assertLess(seconds, 30)

    def test_other_protocol_version(self):
        self.expect_exit_3(planted("sh", "other_version"),
                           'the worker speaks protocol "ws1-exec-v2"; this ws1check speaks "ws1-exec-v1"')

    def test_bad_timeout_is_exit_2(self):
        r = Run(planted("sh", "crash"), "--op", "silu", timeout_s="soon")
        try:
            self.assertEqual(r.rc, 2, r.stderr)
            self.assertIn("WS1CHECK_EXEC_TIMEOUT: soon: expected a positive number of seconds", r.stderr)
        finally:
            r.close()


class DuringTheRun(unittest.TestCase):
    """A worker that fails a request: that cell red with the reason; never green, never a hang."""

    def red_cells(self, backend, tier="short", timeout_s=None, env_extra=None):
        r = Run(backend, "--op", "silu", "--tier", tier, timeout_s=timeout_s, env_extra=env_extra)
        try:
            self.assertEqual(r.rc, 1, r.stderr)
            cells = r.evidence("planted" if "planted.sh" in backend else "example_numpy")["cells"]
            self.assertTrue(cells)
            self.assertEqual({c["verdict"] for c in cells}, {"red"})
            self.assertEqual(r.leftovers(), [])
            return [c["reason"] for c in cells], r.seconds
        finally:
            r.close()

    def test_hang_is_stopped_at_the_timeout_and_later_cells_fail_at_once(self):
        with tempfile.TemporaryDirectory() as d:
            pids = os.path.join(d, "pids")
            reasons, seconds = self.red_cells(planted("sh", "hang"), tier="all", timeout_s=1,
                                              env_extra={"PLANTED_PIDS": pids})
            self.assertLess(seconds, 60)
            self.assertEqual(len(reasons), 5)
            self.assertEqual(reasons[0], "candidate failed: planted: silu forward: no reply within 1 s "
                                         "(WS1CHECK_EXEC_TIMEOUT); the worker was stopped")
            for r in reasons[1:]:
                self.assertEqual(r, "candidate failed: planted: silu forward: not run: the worker was stopped "
                                    "earlier (silu forward: no reply within 1 s (WS1CHECK_EXEC_TIMEOUT))")
            with open(pids) as f:
                for pid in f.read().split():  # the shell and its sleep: both gone
                    self.assertFalse(alive(pid), f"process {pid} still runs")

    def test_exit_during_a_request(self):
        (reason,), _ = self.red_cells(planted("sh", "exit"))
        self.assertEqual(reason, "candidate failed: planted: silu forward: the worker closed its stdout "
                                 "(exited with status 7); the worker was stopped; its stderr ends: "
                                 '"planted: segmentation fault in the silu kernel"')

    def test_malformed_reply(self):
        (reason,), _ = self.red_cells(planted("sh", "malformed"))
        self.assertTrue(reason.startswith("candidate failed: planted: silu forward: malformed reply: a line that is not a protocol message: \"Traceback (most recent call last)"),
                        reason)
        self.assertTrue(reason.endswith("; the worker was stopped"), reason)

    def test_reply_missing_a_field(self):
        (reason,), _ = self.red_cells(planted("sh", "missing_field"))
        self.assertEqual(reason, "candidate failed: planted: silu forward: malformed reply: kernel_id: missing "
                                 "required key; the worker was stopped")

    @unittest.skipUnless(has_numpy(), "numpy is not importable")
    def test_wrong_shape(self):
        (reason,), _ = self.red_cells(planted("py", "wrong_shape"))
        self.assertIn("candidate shape [", reason)
        self.assertIn("differs from the reference shape", reason)

    @unittest.skipUnless(has_numpy(), "numpy is not importable")
    def test_nan(self):
        (reason,), _ = self.red_cells(planted("py", "nan"))
        self.assertIn("NaN", reason)

    @unittest.skipUnless(has_numpy(), "numpy is not importable")
    def test_wrong_dtype(self):
        (reason,), _ = self.red_cells(planted("py", "wrong_dtype"))
        self.assertEqual(reason, "candidate failed: example_numpy: silu forward: it returned 'y' as F32; the op "
                                 "returns BF16")

    @unittest.skipUnless(has_numpy(), "numpy is not importable")
    def test_tf32_readback(self):
        (reason,), _ = self.red_cells(planted("py", "tf32"))
        self.assertEqual(reason, "candidate failed: example_numpy: silu forward: its readback says TF32 is enabled "
                                 "(spec 2.1: disabled on the candidate path)")


@unittest.skipUnless(has_numpy(), "numpy is not importable")
class InputCache(unittest.TestCase):
    """A worker's input cache (the optional input_cache_bytes of ws1-exec-v1): a faithful one
    changes nothing but what crosses the exchange; one that keeps the wrong tensor or none is red."""

    def invariance(self, mode, env_extra=None):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out")
            env = dict(os.environ, TMPDIR=d, WS1CHECK_EXEC_CACHE_MIN_BYTES="1")
            env.update(env_extra or {})
            worker = f"exec:{PY} {shlex.quote(src('test/data/exec_workers/planted_cache.py'))} {mode}"
            p = subprocess.run([WS1CHECK, "invariance", "--workload", src("fixtures/ws1-smoke.json"), "--out", out,
                                "--backend", worker, "--op", "silu", "--direction", "fwd"],
                               capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
            evidence = None
            if os.path.exists(os.path.join(out, "invariance-example_numpy.json")):
                with open(os.path.join(out, "invariance-example_numpy.json")) as f:
                    evidence = json.load(f)
            return p, evidence

    def test_faithful_cache_is_green_and_used(self):
        p, e = self.invariance("faithful")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual({c["verdict"] for c in e["cells"]} - {"na"}, {"green"})
        self.assertRegex(p.stderr, r"example_numpy: \d+ inputs \(.* GB\) named by content key instead of sent again")

    def test_cache_off_sends_everything(self):
        p, e = self.invariance("faithful", {"WS1CHECK_EXEC_CACHE_MIN_BYTES": "0"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("named by content key", p.stderr)

    def test_bad_threshold_is_exit_2(self):
        p, e = self.invariance("faithful", {"WS1CHECK_EXEC_CACHE_MIN_BYTES": "1MB"})
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("WS1CHECK_EXEC_CACHE_MIN_BYTES: 1MB: expected a number of bytes", p.stderr)
        self.assertIsNone(e)

    def test_cache_keyed_by_name_is_red(self):
        p, e = self.invariance("by_name")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("red", {c["verdict"] for c in e["cells"]})

    def test_cache_that_keeps_nothing_is_red(self):
        p, e = self.invariance("forgetful")
        self.assertEqual(p.returncode, 1, p.stderr)
        reasons = [c["reason"] for c in e["cells"] if c["verdict"] == "red"]
        self.assertTrue(reasons)
        for r in reasons:
            self.assertRegex(r, r"the worker reports an error: KeyError: .input cache: cached: '[a-z.]+': "
                                r"no tensor kept under xxh3-128:[0-9a-f]{32}")


if __name__ == "__main__":
    WS1CHECK = os.path.abspath(sys.argv[1])
    ROOT = os.path.abspath(sys.argv[2])
    unittest.main(argv=[sys.argv[0], "-v"])
