#!/usr/bin/env python3
"""The Debian package (tools/package_deb.sh): built from the build directory, its control names the
shared libraries' packages; installed by dpkg into an empty root (its own dpkg database: a fresh
system's view of the package), the installed ws1check runs from another directory, reads the
installed contract and workloads, judges a cell green, and serves the installed Triton worker,
which imports the installed Python package; dpkg removes every file again.

Usage: deb_test.py BUILD_ROOT SOURCE_ROOT (skipped, exit 77, without dpkg-deb / dpkg-shlibdeps)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

if not (shutil.which("dpkg-deb") and shutil.which("dpkg-shlibdeps") and shutil.which("dpkg")):
    print("skipped: dpkg-dev is not installed (tools/setup.sh --tests installs it)", file=sys.stderr)
    sys.exit(77)

BUILD = ROOT = None


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


class DebianPackage(unittest.TestCase):
    def test_package_installs_runs_and_removes(self):
        with tempfile.TemporaryDirectory() as d:
            p = run(["bash", os.path.join(ROOT, "tools", "package_deb.sh"), BUILD, os.path.join(d, "out")])
            self.assertEqual(p.returncode, 0, p.stderr)
            deb = p.stdout.strip()
            self.assertTrue(deb.endswith(".deb") and os.path.isfile(deb), p.stdout)
            fields = run(["dpkg-deb", "-f", deb, "Package", "Version", "Depends"]).stdout
            self.assertIn("Package: ws1check", fields)
            for lib in ("libc6", "libstdc++6", "libfmt9", "libspdlog", "libsimdjson", "libxxhash0", "libssl3"):
                self.assertIn(lib, fields)
            contents = run(["dpkg-deb", "-c", deb]).stdout
            for rel in ("./usr/bin/ws1check", "./usr/share/ws1check/contracts/ws1-c1-v2.json",
                        "./usr/share/ws1check/fixtures/ws1-smoke.lock.json", "./usr/share/ws1check/triton/ws1_worker.py",
                        "./usr/share/ws1check/python/ws1check/__init__.py",
                        "./usr/share/ws1check/python/ws1check/protocol.py"):
                self.assertIn(rel, contents)
            self.assertNotIn("__pycache__", contents)

            # An empty root with its own dpkg database.
            root = os.path.join(d, "root")
            admin = os.path.join(root, "var", "lib", "dpkg")
            for sub in ("info", "updates", "triggers"):
                os.makedirs(os.path.join(admin, sub))
            open(os.path.join(admin, "status"), "w").close()
            dpkg = ["dpkg", f"--root={root}", "--force-not-root", "--force-depends", "--log=/dev/null"]
            p = run(dpkg + ["--install", deb])
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("install ok installed", run(dpkg + ["--status", "ws1check"]).stdout)

            exe = os.path.join(root, "usr", "bin", "ws1check")
            share = os.path.join(root, "usr", "share", "ws1check")
            elsewhere = os.path.join(d, "elsewhere")
            os.mkdir(elsewhere)
            env = {k: v for k, v in os.environ.items() if k not in ("WS1CHECK_DATA_DIR", "PYTHONPATH")}
            p = run([exe, "env"], cwd=elsewhere, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(os.path.join(share, "contracts", "ws1-c1-v2.json"), p.stdout)
            smoke = os.path.join(share, "fixtures", "ws1-smoke.json")
            p = run([exe, "accuracy", "--op", "silu", "--tier", "short", "--workload", smoke, "--out", "out"],
                    cwd=elsewhere, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(os.path.join(elsewhere, "out", "accuracy-cpu_bf16.json")) as f:
                e = json.load(f)
            self.assertEqual(e["verdict"], "green")
            self.assertEqual(e["contract"]["path"], os.path.join(share, "contracts", "ws1-c1-v2.json"))

            # The installed Triton worker imports the installed package (no Triton here: it
            # announces no op, so the cell is red "not provided", not a failed handshake).
            worker = f"exec:{sys.executable} {os.path.join(share, 'triton', 'ws1_worker.py')}"
            p = run([exe, "accuracy", "--op", "silu", "--tier", "short", "--workload", smoke, "--out", "out2",
                     "--backend", worker], cwd=elsewhere, env=env)
            self.assertEqual(p.returncode, 1, p.stderr)
            with open(os.path.join(elsewhere, "out2", "accuracy-triton_cuda_bf16.json")) as f:
                (cell,) = json.load(f)["cells"]
            self.assertIn("not provided by the worker", cell["reason"])
            p = run([sys.executable, "-c", "import ws1check, sys; print(ws1check.__file__)"], cwd=elsewhere,
                    env=dict(env, PYTHONPATH=os.path.join(share, "python")))
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(p.stdout.strip().startswith(share), p.stdout)

            p = run(dpkg + ["--remove", "ws1check"])
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertFalse(os.path.exists(exe))
            self.assertFalse(os.path.exists(os.path.join(share, "contracts", "ws1-c1-v2.json")))


if __name__ == "__main__":
    BUILD, ROOT = os.path.abspath(sys.argv.pop(1)), os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
