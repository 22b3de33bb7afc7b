#!/usr/bin/env python3
"""kill -9 of ws1check in the middle of a run leaves no partial artifact at a final name.

`ws1check gate` on the smoke workload (cpu_bf16) and `ws1check accuracy --out` are killed
(SIGKILL) at fractions of a full run's time while they compute cells, and, watched through
inotify, right when the Nth output's temporary file is created (mid-write) and right after the
first output is renamed into place (between two writes). Every file at a final name must then be
complete (valid JSON / XML / HTML, or absent); the only other names allowed are the hidden
temporary files of lib/evidence/atomic_write.cpp. A directory holding a previous run's outputs
keeps each of them whole: old bytes or a complete new file.

Usage: kill_test.py WS1CHECK SOURCE_ROOT   (stdlib only; Linux: inotify through ctypes)
"""
import ctypes
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import faults_support as fs

WS1CHECK = None
ROOT = None
SMOKE = None

MID_WRITE_ATTEMPTS = 5
IN_CREATE = 0x00000100
IN_MOVED_TO = 0x00000080
_EVENT = struct.Struct("iIII")


class Inotify:
    """Creation and rename-into events of one directory (ctypes: no inotify module in stdlib)."""

    def __init__(self, directory):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_CLOEXEC | os.O_NONBLOCK)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        if self.libc.inotify_add_watch(self.fd, os.fsencode(directory), IN_CREATE | IN_MOVED_TO) < 0:
            err = ctypes.get_errno()
            os.close(self.fd)
            raise OSError(err, f"inotify_add_watch {directory}")

    def events(self, timeout_s):
        """[(mask, name)] within timeout_s (may be empty)."""
        ready, _, _ = select.select([self.fd], [], [], timeout_s)
        if not ready:
            return []
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        out, off = [], 0
        while off + _EVENT.size <= len(data):
            _, mask, _, length = _EVENT.unpack_from(data, off)
            off += _EVENT.size
            out.append((mask, data[off:off + length].rstrip(b"\0").decode()))
            off += length
        return out

    def close(self):
        os.close(self.fd)


def gate_args(out):
    return [WS1CHECK, "gate", "--backends", "cpu_bf16", "--workload", SMOKE, "--out", out, "-q"]


def accuracy_args(out):
    return [WS1CHECK, "accuracy", "--op", "all", "--direction", "both", "--workload", SMOKE,
            "--out", out]


def start(args):
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)


def finish(proc):
    _, err = proc.communicate(timeout=600)
    return proc.returncode, err.decode("utf-8", "replace")


def kill_after(args, seconds):
    """Runs args and SIGKILLs it after `seconds`; returns its return code (-9 when killed)."""
    proc = start(args)
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
    return finish(proc)[0]


def kill_on_event(args, out, nth, mask):
    """Runs args and SIGKILLs it at the nth inotify event of `mask` in `out` (IN_CREATE of a
    temporary file: mid-write; IN_MOVED_TO: right after a rename into place). Returns (return
    code, names of the events seen)."""
    watch = Inotify(out)
    proc = start(args)
    seen = []
    try:
        while proc.poll() is None:
            for m, name in watch.events(0.2):
                if not m & mask:
                    continue
                if mask == IN_CREATE and not fs.TEMP_NAME.match(name):
                    continue
                seen.append(name)
                if len(seen) == nth:
                    proc.send_signal(signal.SIGKILL)
                    break
            if len(seen) >= nth:
                break
    finally:
        watch.close()
        if proc.poll() is None and len(seen) < nth:
            proc.send_signal(signal.SIGKILL)
    return finish(proc)[0], seen


class Reference:
    """One full run of each command: its time and outputs (the old files of later runs)."""
    gate_seconds = None
    gate_dir = None
    accuracy_seconds = None
    accuracy_dir = None
    accuracy_name = None


def setUpModule():
    Reference.root = tempfile.mkdtemp(prefix="ws1-kill-")
    for kind, args_of in (("gate", gate_args), ("accuracy", accuracy_args)):
        out = os.path.join(Reference.root, kind)
        t = time.monotonic()
        rc, err = finish(start(args_of(out)))
        if rc not in (0, 1):
            raise RuntimeError(f"reference {kind} run: exit {rc}: {err}")
        setattr(Reference, f"{kind}_seconds", time.monotonic() - t)
        setattr(Reference, f"{kind}_dir", out)
    (Reference.accuracy_name,) = os.listdir(Reference.accuracy_dir)
    print(f"reference runs: gate {Reference.gate_seconds:.1f} s, accuracy {Reference.accuracy_seconds:.1f} s",
          file=sys.stderr)


def tearDownModule():
    shutil.rmtree(Reference.root, ignore_errors=True)


class Case(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="ws1-kill-case-")
        self.out = os.path.join(self.dir, "out")
        os.mkdir(self.out)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def seed_previous_outputs(self, source):
        for name in os.listdir(source):
            shutil.copyfile(os.path.join(source, name), os.path.join(self.out, name))
        old = {}
        for name in os.listdir(source):
            with open(os.path.join(source, name), "rb") as f:
                old[name] = f.read()
        return old


class KillGate(Case):
    def test_killed_while_computing_cells_writes_nothing(self):
        for fraction in (0.15, 0.4, 0.7):
            with self.subTest(fraction=fraction):
                shutil.rmtree(self.out)
                os.mkdir(self.out)
                rc = kill_after(gate_args(self.out), Reference.gate_seconds * fraction)
                present, _ = fs.check_out_dir(self, self.out, fs.GATE_OUTPUTS, f"killed at {fraction:.0%}")
                if rc == -signal.SIGKILL:
                    # The outputs are written after the last cell and stage: none yet.
                    self.assertEqual(present, [], f"killed at {fraction:.0%}")

    def test_killed_mid_write_of_each_output(self):
        # The kill lands a moment after the temporary file appears; on a loaded machine the
        # write may finish first. Any outcome must leave complete files; each output is tried
        # a few times so that the kill does land mid-write (at least gate.json's, 1 MB, must).
        hit = set()
        for nth in range(1, len(fs.GATE_OUTPUTS) + 1):
            name = fs.GATE_OUTPUTS[nth - 1]
            for attempt in range(MID_WRITE_ATTEMPTS):
                with self.subTest(output=name, attempt=attempt):
                    shutil.rmtree(self.out)
                    os.mkdir(self.out)
                    rc, seen = kill_on_event(gate_args(self.out), self.out, nth, IN_CREATE)
                    self.assertEqual(len(seen), nth, f"saw only {seen}")
                    present, temps = fs.check_out_dir(self, self.out, fs.GATE_OUTPUTS, f"killed writing {name}")
                    self.assertIn(rc, (-signal.SIGKILL, 0, 1))
                    # The outputs before the nth are in place and complete; the outputs in place
                    # are a prefix of the write order (a kill that lands late, on a loaded
                    # machine, may find more of them written, never one out of order).
                    self.assertTrue(set(fs.GATE_OUTPUTS[:nth - 1]) <= set(present), (seen, present, temps))
                    self.assertEqual(set(present), set(fs.GATE_OUTPUTS[:len(present)]), (seen, present, temps))
                    if rc == -signal.SIGKILL and name not in present:
                        # Killed mid-write: the nth is only its temporary file.
                        self.assertEqual([fs.TEMP_NAME.match(t).group(1) for t in temps], [name])
                        hit.add(name)
                if name in hit:
                    break
            if name not in hit:
                print(f"note: the kill never landed while {name} was written "
                      f"({MID_WRITE_ATTEMPTS} attempts)", file=sys.stderr)
        self.assertIn("gate.json", hit)

    def test_killed_between_two_outputs(self):
        rc, seen = kill_on_event(gate_args(self.out), self.out, 1, IN_MOVED_TO)
        self.assertEqual(seen, ["gate.json"])
        present, _ = fs.check_out_dir(self, self.out, fs.GATE_OUTPUTS, "killed after gate.json")
        self.assertIn("gate.json", present)

    def test_previous_outputs_stay_whole(self):
        # Over a previous run's four files: each is the old one or a complete new one.
        for nth in (1, 3):
            with self.subTest(output=nth):
                shutil.rmtree(self.out)
                os.mkdir(self.out)
                old = self.seed_previous_outputs(Reference.gate_dir)
                kill_on_event(gate_args(self.out), self.out, nth, IN_CREATE)
                present, temps = fs.check_out_dir(self, self.out, fs.GATE_OUTPUTS, f"over old outputs, #{nth}")
                self.assertEqual(set(present), set(fs.GATE_OUTPUTS))
                # An output whose temporary file was left (killed while writing it) and every
                # one after it are byte for byte the old ones.
                started = [fs.TEMP_NAME.match(t).group(1) for t in temps]
                for name in fs.GATE_OUTPUTS[fs.GATE_OUTPUTS.index(started[0]):] if started else []:
                    with open(os.path.join(self.out, name), "rb") as f:
                        self.assertEqual(f.read(), old[name], name)


class KillAccuracy(Case):
    def test_killed_while_computing_cells_writes_nothing(self):
        rc = kill_after(accuracy_args(self.out), Reference.accuracy_seconds * 0.5)
        present, _ = fs.check_out_dir(self, self.out, (Reference.accuracy_name,), "accuracy killed at 50%")
        if rc == -signal.SIGKILL:
            self.assertEqual(present, [])

    def test_killed_mid_write(self):
        rc, seen = kill_on_event(accuracy_args(self.out), self.out, 1, IN_CREATE)
        self.assertEqual(len(seen), 1)
        self.assertIn(rc, (-signal.SIGKILL, 0, 1))
        present, temps = fs.check_out_dir(self, self.out, (Reference.accuracy_name,), "accuracy killed mid-write")
        if temps:  # killed while writing: nothing at the final name
            self.assertEqual(present, [])

    def test_previous_evidence_stays_whole(self):
        old = self.seed_previous_outputs(Reference.accuracy_dir)
        kill_on_event(accuracy_args(self.out), self.out, 1, IN_CREATE)
        present, temps = fs.check_out_dir(self, self.out, (Reference.accuracy_name,), "accuracy over old evidence")
        self.assertEqual(present, [Reference.accuracy_name])
        if temps:  # killed while writing: the old file is untouched
            with open(os.path.join(self.out, Reference.accuracy_name), "rb") as f:
                self.assertEqual(f.read(), old[Reference.accuracy_name])


if __name__ == "__main__":
    WS1CHECK = os.path.abspath(sys.argv.pop(1))
    ROOT = os.path.abspath(sys.argv.pop(1))
    SMOKE = os.path.join(ROOT, "fixtures", "ws1-smoke.json")
    unittest.main(verbosity=2)
