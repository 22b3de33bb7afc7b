#!/usr/bin/env python3
"""`meson install` lays ws1check out as a tool: bin/ws1check and share/ws1check/ (contracts,
schemas, workload manifests with their locks, the Triton worker, the Python package), and the installed binary reads
the installed files from any directory — the evidence names them — with no source tree needed.

Usage: install_test.py MESON BUILD_ROOT SOURCE_ROOT   (stdlib only)"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

MESON = BUILD = ROOT = None


class Install(unittest.TestCase):
    def test_installed_tree_runs_from_anywhere(self):
        with tempfile.TemporaryDirectory() as d:
            dest = os.path.join(d, "dest")
            p = subprocess.run([MESON, "install", "-C", BUILD, "--destdir", dest, "--no-rebuild", "--quiet"],
                               capture_output=True, text=True, timeout=600)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            bins = [os.path.join(r, f) for r, _, fs in os.walk(dest) for f in fs if f == "ws1check"]
            self.assertEqual(len(bins), 1, bins)
            exe = bins[0]
            share = os.path.join(os.path.dirname(os.path.dirname(exe)), "share", "ws1check")
            for rel in ("contracts/ws1-c1-v2.json", "contracts/evidence.schema.json",
                        "fixtures/ws1-qwen3-8b-dense.json", "fixtures/ws1-qwen3-8b-dense.lock.json",
                        "fixtures/ws1-smoke.json", "fixtures/ws1-smoke.lock.json", "triton/ws1_worker.py",
                        "python/ws1check/__init__.py", "python/ws1check/protocol.py"):
                self.assertTrue(os.path.isfile(os.path.join(share, rel)), rel)
            self.assertFalse(any("__pycache__" in r for r, _, _ in os.walk(share)))

            elsewhere = os.path.join(d, "elsewhere")
            os.mkdir(elsewhere)
            env = {k: v for k, v in os.environ.items() if k != "WS1CHECK_DATA_DIR"}
            p = subprocess.run([exe, "env"], capture_output=True, text=True, cwd=elsewhere, env=env, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(os.path.join(share, "contracts", "ws1-c1-v2.json"), p.stdout)
            p = subprocess.run([exe, "accuracy", "--op", "silu", "--tier", "short", "--workload",
                                os.path.join(share, "fixtures", "ws1-smoke.json"), "--out", "out"],
                               capture_output=True, text=True, cwd=elsewhere, env=env, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(elsewhere, "out", "accuracy-cpu_bf16.json")) as f:
                e = json.load(f)
            self.assertEqual(e["verdict"], "green")
            self.assertEqual(e["contract"]["path"], os.path.join(share, "contracts", "ws1-c1-v2.json"))


if __name__ == "__main__":
    MESON, BUILD, ROOT = sys.argv[1], sys.argv[2], sys.argv[3]
    del sys.argv[1:4]
    unittest.main(verbosity=2)
