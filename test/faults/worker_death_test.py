#!/usr/bin/env python3
"""An exec: worker killed (SIGKILL) in the middle of a request: the cell it was serving is red
naming the death, every later cell is red "not run", nothing after it is green, the exit code is
1, and no process or exchange file is left. The same worker not killed (the twin) is green,
exit 0, with the same cells.

Usage: worker_death_test.py WS1CHECK SOURCE_ROOT   (stdlib only)
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from procs import alive  # noqa: E402

WS1CHECK = None
ROOT = None
SMOKE = None
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dying_worker.py")
DEATH = "the worker closed its stdout (killed by signal 9)"


class Run:
    """One run of `ws1check COMMAND ... --backend exec:dying_worker.py KILL_AT` on the smoke
    workload, in a private TMPDIR and --out."""

    def __init__(self, command, kill_at, *args):
        with tempfile.TemporaryDirectory() as d:
            tmp, out, pids = os.path.join(d, "tmp"), os.path.join(d, "out"), os.path.join(d, "pids")
            os.mkdir(tmp)
            # `exec`: the shell becomes the worker, so its own death is what ws1check sees.
            backend = "exec:exec " + " ".join(shlex.quote(a) for a in
                                              (sys.executable, WORKER, WS1CHECK, str(kill_at), pids))
            cmd = [WS1CHECK, command, "--workload", SMOKE, "--backend", backend, "--out", out, *args]
            p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=500,
                               env=dict(os.environ, TMPDIR=tmp, WS1CHECK_EXEC_TIMEOUT="120"))
            self.rc, self.stdout, self.stderr = p.returncode, p.stdout, p.stderr
            evidence = os.path.join(out, f"{command}-dying_cpu.json")
            if not os.path.exists(evidence):
                raise AssertionError(f"exit {self.rc}, no evidence: {self.stderr}")
            with open(evidence) as f:
                self.cells = json.load(f)["cells"]
            with open(pids) as f:
                self.pids = f.read().split()
            self.leftovers = os.listdir(tmp)

    def by_verdict(self, verdict):
        return [c for c in self.cells if c["verdict"] == verdict]


class WorkerKilledMidRequest(unittest.TestCase):
    def check(self, command, kill_at, *args):
        twin = Run(command, 0, *args)
        self.assertEqual(twin.rc, 0, twin.stderr)
        self.assertFalse(twin.by_verdict("red"), [c["reason"] for c in twin.by_verdict("red")])
        self.assertTrue(twin.by_verdict("green"))

        killed = Run(command, kill_at, *args)
        self.assertEqual(killed.rc, 1, killed.stderr)
        self.assertEqual([c["id"] for c in killed.cells], [c["id"] for c in twin.cells])
        red = killed.by_verdict("red")
        reasons = [c["reason"] for c in red]
        # The cell being served (or the cells sharing that call: invariance cells share their
        # canonical call) names the death and quotes the worker's last words ...
        dead = [r for r in reasons if "stopped earlier" not in r]
        self.assertTrue(dead, reasons)
        for r in dead:
            self.assertIn(DEATH, r)
            self.assertIn(f'its stderr ends: "dying_worker: SIGKILL inside request {kill_at} ', r)
        # ... every later request is refused, naming it.
        for r in reasons:
            if r not in dead:
                self.assertIn("not run: the worker was stopped earlier", r)
                self.assertIn(DEATH, r)
        # Nothing the dead worker would have served is green: only cells whose requests all
        # came before the kill can be, and each is green in the twin too.
        green = killed.by_verdict("green")
        self.assertLess(len(green), kill_at)
        twin_green = {c["id"] for c in twin.by_verdict("green")}
        for c in green:
            self.assertIn(c["id"], twin_green)
        self.assertEqual({c["verdict"] for c in killed.cells} - {"green", "red", "na"}, set())
        self.assertEqual(len(killed.cells) - len(killed.by_verdict("na")), len(red) + len(green))
        for run in (twin, killed):
            self.assertEqual(run.leftovers, [])
            for pid in run.pids:
                self.assertFalse(alive(pid), f"process {pid} still runs")
        return twin, killed

    def test_accuracy(self):
        self.check("accuracy", 3, "--op", "rms_norm", "--direction", "both", "--tier", "all")

    def test_invariance_mid_cell(self):
        # The second request is the first cell's transformed call: the cell dies half-way.
        twin, killed = self.check("invariance", 2, "--op", "rms_norm", "--direction", "fwd")
        self.assertEqual(killed.by_verdict("green"), [])


if __name__ == "__main__":
    WS1CHECK = os.path.abspath(sys.argv.pop(1))
    ROOT = os.path.abspath(sys.argv.pop(1))
    SMOKE = os.path.join(ROOT, "fixtures", "ws1-smoke.json")
    unittest.main(verbosity=2)
