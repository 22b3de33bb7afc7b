#!/usr/bin/env python3
"""A full disk at --out: exit 3 (an environment failure), one error line naming the file, and
nothing half written: no file at a final name, no temporary file, and when an earlier output
was already in place, it is removed again (the gate writes all its outputs or none).

Two ways to fill the disk, both real failures of write(2):
  tmpfs  a tmpfs of a few pages mounted in a private mount namespace (`unshare --mount` as root,
         `unshare --user --map-root-user --mount` otherwise): write() fails with ENOSPC. Where
         neither is allowed (no root, unprivileged user namespaces off) it exits 77 (skipped)
         and says why.
  fsize  RLIMIT_FSIZE below the output's size, SIGXFSZ ignored: write() fails with EFBIG.
         Needs no privilege: runs on every machine. (The roll-back of outputs already in place
         is checked here with a later output's name taken by a directory: a per-file limit
         cannot stop a later, smaller output after the first, largest one.)

Usage: disk_full_test.py tmpfs|fsize WS1CHECK SOURCE_ROOT   (stdlib only)
"""
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

import faults_support as fs

MODE = None
WS1CHECK = None
ROOT = None
SMOKE = None
# One op: its gate.json (~6 KB) is smaller than its c8-execute.json, so a limit can let the first
# output through and stop the second.
GATE_OPS = "silu"
PAGE = 4096
NAMESPACE = None  # the unshare prefix that lets this process mount a tmpfs (tmpfs mode)
# Inside the namespace: mount the tmpfs, run ws1check on it, then copy what it left (and the
# names) out before the namespace, and the tmpfs with it, goes away.
IN_NAMESPACE = ('mount -t tmpfs -o "size=$1" ws1-full "$2" || exit 97; dir=$2; copy=$3; shift 3; '
                '"$@"; rc=$?; ls -A "$dir" >"$copy.names" && cp -a "$dir/." "$copy/" || exit 98; exit $rc')


def gate_args(out):
    return [WS1CHECK, "gate", "--backends", "cpu_bf16", "--ops", GATE_OPS, "--workload", SMOKE,
            "--out", out, "-q"]


def accuracy_args(out):
    return [WS1CHECK, "accuracy", "--op", "rms_norm", "--workload", SMOKE, "--out", out]


def find_namespace():
    """(prefix, None) for an unshare prefix under which mounting a tmpfs works, else (None, why)."""
    if shutil.which("unshare") is None:
        return None, "no unshare(1) on this machine"
    prefix = (["unshare", "--mount", "--propagation", "private"] if os.geteuid() == 0 else
              ["unshare", "--user", "--map-root-user", "--mount"])
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(prefix + ["mount", "-t", "tmpfs", "-o", "size=64k", "ws1-probe", d],
                           capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        who = "as root" if os.geteuid() == 0 else "without root (unprivileged user namespaces)"
        return None, f"cannot mount a tmpfs {who}: {' '.join(prefix)}: {p.stderr.strip()}"
    return prefix, None


def run_tmpfs(size, args_of):
    """Runs args_of(mount point) on a tmpfs of `size` bytes. Returns (rc, stdout, stderr, copy
    of what was left on the tmpfs)."""
    d = tempfile.mkdtemp(prefix="ws1-full-")
    mnt, copy = os.path.join(d, "mnt"), os.path.join(d, "left")
    os.mkdir(mnt)
    os.mkdir(copy)
    p = subprocess.run(NAMESPACE + ["sh", "-c", IN_NAMESPACE, "sh", str(size), mnt, copy, *args_of(mnt)],
                       capture_output=True, text=True, cwd=ROOT, timeout=500)
    if p.returncode in (97, 98):
        raise RuntimeError(f"tmpfs harness failed ({p.returncode}): {p.stderr}")
    with open(copy + ".names") as f:
        names = f.read().split()
    return p.returncode, p.stdout, p.stderr, copy, names, d


def run_fsize(limit, args_of, out):
    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills ws1check at the limit
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    p = subprocess.run(args_of(out), capture_output=True, text=True, cwd=ROOT, timeout=500,
                       preexec_fn=limit_file_size)
    return p.returncode, p.stdout, p.stderr


def output_sizes():
    """The sizes of one unlimited run's outputs, in the order the gate writes them."""
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run(gate_args(d), capture_output=True, text=True, cwd=ROOT, timeout=500)
        if p.returncode not in (0, 1):
            raise RuntimeError(f"reference gate: exit {p.returncode}: {p.stderr}")
        sizes = [os.path.getsize(os.path.join(d, n)) for n in fs.GATE_OUTPUTS]
        old = {n: open(os.path.join(d, n), "rb").read() for n in fs.GATE_OUTPUTS}
    return sizes, old


def pages(n):
    return (n + PAGE - 1) // PAGE * PAGE


class Checks(unittest.TestCase):
    sizes = None
    old = None

    @classmethod
    def setUpClass(cls):
        cls.sizes, cls.old = output_sizes()
        print("output sizes: " + ", ".join(f"{n} {s} B" for n, s in zip(fs.GATE_OUTPUTS, cls.sizes)),
              file=sys.stderr)

    def expect_environment_failure(self, rc, stdout, stderr, cause):
        self.assertEqual(rc, 3, stderr)
        errors = [l for l in stderr.splitlines() if l.startswith("ws1check: error:")]
        self.assertEqual(len(errors), 1, stderr)
        self.assertIn(cause, errors[0])
        self.assertNotIn("wrote ", stdout)


class FullTmpfs(Checks):
    ENOSPC = os.strerror(28)  # "No space left on device"

    def run_and_check(self, size, args_of):
        rc, out, err, _, names, d = run_tmpfs(size, args_of)
        try:
            self.expect_environment_failure(rc, out, err, self.ENOSPC)
            self.assertEqual(names, [], "left on the full disk")
            return err
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_gate_nothing_fits(self):
        self.assertGreater(self.sizes[0], PAGE, "gate.json must not fit in one page")
        self.run_and_check(PAGE, gate_args)

    def test_gate_first_output_fits_a_later_one_does_not(self):
        # gate.json (and maybe more) fits, not all four: the ones in place are removed again.
        size = pages(self.sizes[0]) + PAGE
        self.assertLess(size, sum(pages(s) for s in self.sizes), "every output would fit")
        err = self.run_and_check(size, gate_args)
        self.assertNotIn("gate.json", err, "gate.json did not fit")

    def test_accuracy_nothing_fits(self):
        self.run_and_check(PAGE, accuracy_args)


class FileSizeLimit(Checks):
    EFBIG = os.strerror(27)  # "File too large"

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ws1-fsize-")
        self.out = os.path.join(self.dir, "out")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_gate_nothing_fits(self):
        self.assertGreater(self.sizes[0], PAGE, "gate.json must not fit in one page")
        rc, out, err = run_fsize(PAGE, gate_args, self.out)
        self.expect_environment_failure(rc, out, err, self.EFBIG)
        self.assertEqual(os.listdir(self.out) if os.path.exists(self.out) else [], [])

    def test_outputs_in_place_are_removed_when_a_later_one_fails(self):
        # gate.json is written first and is the largest, so a per-file limit stops it or nothing;
        # the roll-back is seen here through the last output's name taken by a directory (exit 2,
        # a bad --out; on a full tmpfs, exit 3, in the tmpfs mode).
        blocker = os.path.join(self.out, fs.GATE_OUTPUTS[-1], "inside")
        os.makedirs(blocker)
        p = subprocess.run(gate_args(self.out), capture_output=True, text=True, cwd=ROOT, timeout=500)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(fs.GATE_OUTPUTS[-1], p.stderr)
        self.assertEqual(os.listdir(self.out), [fs.GATE_OUTPUTS[-1]], "outputs before the failure are removed")
        self.assertTrue(os.path.isdir(blocker))

    def test_previous_outputs_stay_whole(self):
        os.mkdir(self.out)
        for name, data in self.old.items():
            with open(os.path.join(self.out, name), "wb") as f:
                f.write(data)
        rc, out, err = run_fsize(PAGE, gate_args, self.out)
        self.expect_environment_failure(rc, out, err, self.EFBIG)
        self.assertEqual(sorted(os.listdir(self.out)), sorted(fs.GATE_OUTPUTS))
        for name, data in self.old.items():
            with open(os.path.join(self.out, name), "rb") as f:
                self.assertEqual(f.read(), data, name)

    def test_accuracy_nothing_fits(self):
        rc, out, err = run_fsize(PAGE, accuracy_args, self.out)
        self.expect_environment_failure(rc, out, err, self.EFBIG)
        self.assertEqual(os.listdir(self.out) if os.path.exists(self.out) else [], [])


if __name__ == "__main__":
    MODE = sys.argv.pop(1)
    WS1CHECK = os.path.abspath(sys.argv.pop(1))
    ROOT = os.path.abspath(sys.argv.pop(1))
    SMOKE = os.path.join(ROOT, "fixtures", "ws1-smoke.json")
    if MODE == "tmpfs":
        NAMESPACE, why = find_namespace()
        if NAMESPACE is None:
            print(f"skipped: {why}", file=sys.stderr)
            sys.exit(77)
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(FullTmpfs)
    elif MODE == "fsize":
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(FileSizeLimit)
    else:
        sys.exit(f"usage: {sys.argv[0]} tmpfs|fsize WS1CHECK SOURCE_ROOT")
    ok = unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful()
    sys.exit(0 if ok else 1)
