#!/usr/bin/env python3
"""End-to-end tests of `ws1check accuracy --inputs FILE` (bring-your-own tensors) and `--dump DIR`
(per-cell safetensors of inputs, candidate and reference), and of `ws1check ops --op X` (the
tensors op X takes): a dump replays with the same verdicts and fixture hash; every bad input
exits 2 with one stderr line naming the file and the field, and leaves no evidence and no dump.

Usage: inputs_dump_test.py WS1CHECK SOURCE_ROOT   (stdlib only)
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

WS1CHECK = None
ROOT = None
SMOKE = None
EVIDENCE = "accuracy-cpu_bf16.json"


def run(*args):
    p = subprocess.run([WS1CHECK, *args], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def accuracy(*args):
    return run("accuracy", "--workload", SMOKE, "--backend", "cpu_bf16", *args)


# ---- safetensors, stdlib only: tensors as (dtype, shape, raw little-endian bytes) ----

def read_st(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        tensors[name] = (e["dtype"], e["shape"], data[8 + n + b:8 + n + end])
    return meta, tensors


def write_st(path, tensors, meta=None):
    header, off, blobs = {}, 0, []
    if meta:
        header["__metadata__"] = meta
    for name, (dt, shape, raw) in tensors.items():
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def put(path, data):
    with open(path, "wb") as f:
        f.write(data)


def bf16_to_f32(raw):
    """Exact upcast of bf16 bytes to float32 bytes."""
    out = bytearray()
    for i in range(0, len(raw), 2):
        out += b"\0\0" + raw[i:i + 2]
    return bytes(out)


def cells(out_dir):
    with open(os.path.join(out_dir, EVIDENCE)) as f:
        return json.load(f)["cells"]


class InputsAndDumps(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, *parts):
        return os.path.join(self.d, *parts)

    def plain_rms_norm_file(self):
        """rms_norm/short/normal exported, its tensors rewritten without ws1 metadata."""
        exported = self.path("exported.safetensors")
        rc, _, err = run("fixtures", "export", "rms_norm/short/normal", "--workload", SMOKE, "--to", exported)
        self.assertEqual(rc, 0, err)
        return read_st(exported)

    def assert_bad(self, args, file, field, dump=None, after_cells=False):
        """Exit 2, one stderr line naming file and field, no evidence, no dump left behind.
        after_cells: the error comes after cells ran, whose progress lines ([info]) precede it."""
        out = self.path("out-bad")
        extra = ["--dump", dump] if dump else []
        rc, stdout, err = accuracy(*args, "--out", out, *extra)
        self.assertEqual(rc, 2, err)
        self.assertEqual(stdout, "")
        lines = err.strip().splitlines()
        if after_cells:
            self.assertTrue(all(l.startswith("[info] ") for l in lines[:-1]), err)
            lines = lines[-1:]
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("ws1check: error: "), err)
        self.assertIn(file, lines[0])
        self.assertIn(field, lines[0])
        self.assertFalse(os.path.exists(out), os.listdir(out) if os.path.exists(out) else "")
        if dump and os.path.isdir(dump):
            self.assertEqual(os.listdir(dump), [])

    # ---- dump, then replay ----

    def test_dump_then_replay_gives_same_verdicts_and_hash(self):
        dump, out = self.path("dump"), self.path("out")
        rc, _, err = accuracy("--op", "rms_norm", "--direction", "both", "--tier", "short",
                              "--dump", dump, "--out", out)
        self.assertEqual(rc, 0, err)
        original = cells(out)
        self.assertEqual(len(original), 2)
        files = sorted(os.listdir(dump))
        self.assertEqual(files, sorted(c["id"].replace("/", "__") + ".safetensors" for c in original))
        for c in original:
            f = os.path.join(dump, c["id"].replace("/", "__") + ".safetensors")
            meta, tensors = read_st(f)
            self.assertEqual(meta["ws1.op"], "rms_norm")
            self.assertEqual(meta["ws1.judgment"], c["judgment"])
            self.assertEqual(meta["ws1.fixture_id"], c["fixture"]["id"])
            self.assertEqual(meta["ws1.fixture_hash"], c["fixture"]["hash"])
            self.assertEqual(meta["ws1.contract_version"], "ws1-c1-v2")
            self.assertEqual(meta["ws1.verdict"], c["verdict"])
            outs = ["y"] if c["judgment"] == "forward_accuracy" else ["dx", "dweight"]
            self.assertEqual(sorted(tensors), sorted(["in.x", "in.weight", "in.dy.y"] +
                                                     [p + o for o in outs for p in ("cand.", "ref.")]))
            for o in outs:
                self.assertEqual(tensors["cand." + o][0], "BF16")
                self.assertEqual(tensors["ref." + o][0], "F32")
                self.assertEqual(tensors["cand." + o][1], tensors["ref." + o][1])

            # Replay: the same verdicts, the same hash; a user fixture named after the file.
            out2, dump2 = self.path("out2-" + c["judgment"]), self.path("dump2-" + c["judgment"])
            rc, _, err = accuracy("--op", "rms_norm", "--direction", "both", "--inputs", f,
                                  "--out", out2, "--dump", dump2)
            self.assertEqual(rc, 0, err)
            replay = cells(out2)
            self.assertEqual([r["verdict"] for r in replay], [o["verdict"] for o in original])
            for r, o in zip(replay, original):
                self.assertEqual(r["fixture"]["hash"], o["fixture"]["hash"])
                self.assertEqual(r["fixture"]["id"], "user:" + os.path.basename(f))
                self.assertEqual(r["tier"], "user")
                self.assertEqual(r["judgment"], o["judgment"])
                self.assertEqual([t["name"] for t in r["fixture"]["tensors"]], ["x", "weight", "dy.y"])
                # Same inputs, same deterministic candidate and reference: the same statistics.
                self.assertEqual(r["tensors"], o["tensors"])
            # A dump of the replay replays to the same hash again; its name is portable (the
            # user fixture's "user:" and file extension do not reach it).
            name = sorted(os.listdir(dump2))[0]
            self.assertRegex(name, r"^[A-Za-z0-9._-]+$")
            self.assertEqual(name.count(".safetensors"), 1, name)
            self.assertTrue(name.endswith(".safetensors"), name)
            second = os.path.join(dump2, name)
            rc, _, err = accuracy("--op", "rms_norm", "--inputs", second, "--out", self.path("out3"))
            self.assertEqual(rc, 0, err)
            self.assertEqual(cells(self.path("out3"))[0]["fixture"]["hash"], original[0]["fixture"]["hash"])

    def test_exported_fixture_hashes_like_the_generated_one(self):
        out = self.path("out")
        rc, _, err = accuracy("--op", "rms_norm", "--tier", "short", "--out", out)
        self.assertEqual(rc, 0, err)
        generated = cells(out)[0]["fixture"]["hash"]
        exported = self.path("x.safetensors")
        run("fixtures", "export", "rms_norm/short/normal", "--workload", SMOKE, "--to", exported)
        rc, _, err = accuracy("--op", "rms_norm", "--inputs", exported, "--out", self.path("o2"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(cells(self.path("o2"))[0]["fixture"]["hash"], generated)

    def test_plain_file_forward_without_seeds(self):
        _, t = self.plain_rms_norm_file()
        f = self.path("captured.safetensors")
        write_st(f, {"x": t["x"], "weight": t["weight"]})  # no dy.y: fine for fwd
        out = self.path("out")
        rc, stdout, err = accuracy("--op", "rms_norm", "--inputs", f, "--out", out)
        self.assertEqual(rc, 0, err)
        (c,) = cells(out)
        self.assertEqual(c["fixture"]["id"], "user:captured.safetensors")
        self.assertEqual(c["tier"], "user")
        self.assertRegex(c["fixture"]["hash"], r"^[0-9a-f]{32}$")
        self.assertEqual(c["verdict"], "green")
        self.assertIn("user:captured.safetensors", stdout)

    def test_ops_lists_the_tensors_an_op_takes(self):
        rc, out, err = run("ops", "--op", "rms_norm", "--workload", SMOKE)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"\n  x +BF16 +activation +fwd, bwd +\[8, 64\] +\[59, 64\]")
        self.assertRegex(out, r"\n  weight +BF16 +parameter +fwd, bwd +\[64\] +\[64\]")
        self.assertRegex(out, r"\n  dy.y +BF16 +grad_seed +bwd +\[8, 64\] +\[59, 64\]")
        self.assertRegex(out, r"gradients .*: dx BF16, dweight BF16")
        rc, out, err = run("ops", "--op", "attention", "--workload", SMOKE)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"\n  key_mask +BOOL +index +optional")
        rc, out, err = run("ops", "--op", "logp", "--workload", SMOKE)
        self.assertRegex(out, r"\n  dy.logp +F32 ")
        self.assertRegex(out, r"\n  targets +I64 ")

    # ---- bad inputs ----

    def test_inputs_with_op_all(self):
        _, t = self.plain_rms_norm_file()
        f = self.path("in.safetensors")
        write_st(f, t)
        self.assert_bad(["--op", "all", "--inputs", f], f, "--op")
        self.assert_bad(["--inputs", f], f, "--op")  # --op defaults to all

    def test_truncated_and_tampered_files(self):
        dump = self.path("dump")
        rc, _, err = accuracy("--op", "rms_norm", "--direction", "bwd", "--tier", "short",
                              "--dump", dump, "--out", self.path("o"))
        self.assertEqual(rc, 0, err)
        (src,) = [os.path.join(dump, f) for f in os.listdir(dump)]
        with open(src, "rb") as f:
            data = f.read()
        cut = self.path("cut.safetensors")
        put(cut, data[:-100])
        self.assert_bad(["--op", "rms_norm", "--inputs", cut], cut, "in.")
        flipped = bytearray(data)
        flipped[-3] ^= 0x01  # one bit of a tensor's bytes: the recorded hash no longer holds
        bad = self.path("tampered.safetensors")
        put(bad, flipped)
        self.assert_bad(["--op", "rms_norm", "--inputs", bad], bad, "__metadata__.ws1.fixture_hash")
        flipped = bytearray(data)
        flipped[8] = ord("[")  # the header is no longer a JSON object
        put(bad, flipped)
        self.assert_bad(["--op", "rms_norm", "--inputs", bad], bad, "header")
        self.assert_bad(["--op", "silu", "--inputs", src], src, "__metadata__.ws1.op")

    def test_missing_seed_for_bwd(self):
        _, t = self.plain_rms_norm_file()
        f = self.path("no-seed.safetensors")
        write_st(f, {"x": t["x"], "weight": t["weight"]})
        self.assert_bad(["--op", "rms_norm", "--direction", "bwd", "--inputs", f], f, "dy.y")
        self.assert_bad(["--op", "rms_norm", "--direction", "both", "--inputs", f], f, "dy.y",
                        dump=self.path("dump"))
        g = self.path("no-x.safetensors")
        write_st(g, {"weight": t["weight"], "dy.y": t["dy.y"]})
        self.assert_bad(["--op", "rms_norm", "--inputs", g], g, "x")

    def test_wrong_dtype(self):
        _, t = self.plain_rms_norm_file()
        dt, shape, raw = t["x"]
        self.assertEqual(dt, "BF16")
        f = self.path("f32-x.safetensors")
        write_st(f, {"x": ("F32", shape, bf16_to_f32(raw)), "weight": t["weight"], "dy.y": t["dy.y"]})
        self.assert_bad(["--op", "rms_norm", "--inputs", f], f, "x: is F32")

    def test_extra_tensor(self):
        _, t = self.plain_rms_norm_file()
        f = self.path("extra.safetensors")
        write_st(f, {**t, "bias": t["weight"]})
        self.assert_bad(["--op", "rms_norm", "--inputs", f], f, "bias")

    def test_tier_with_inputs(self):
        _, t = self.plain_rms_norm_file()
        f = self.path("in.safetensors")
        write_st(f, t)
        self.assert_bad(["--op", "rms_norm", "--tier", "short", "--inputs", f], f, "--tier")

    def test_shape_the_op_refuses_after_a_dumped_cell(self):
        # Forward runs and is dumped; backward's dy.y does not fit x: exit 2, and the forward
        # cell's dump is removed again (nothing of a failed run stays).
        _, t = self.plain_rms_norm_file()
        dt, shape, raw = t["dy.y"]
        half = shape[0] // 2
        f = self.path("short-seed.safetensors")
        write_st(f, {"x": t["x"], "weight": t["weight"],
                     "dy.y": (dt, [half] + shape[1:], raw[:len(raw) * half // shape[0]])})
        self.assert_bad(["--op", "rms_norm", "--direction", "both", "--inputs", f], f, "dy.y",
                        dump=self.path("dump"), after_cells=True)
        self.assertFalse(os.path.exists(self.path("dump")))

    def test_dump_into_a_file(self):
        blocker = self.path("not-a-dir")
        put(blocker, b"x")
        self.assert_bad(["--op", "silu", "--tier", "short"], blocker, "--dump", dump=blocker)
        with open(blocker, "rb") as f:
            self.assertEqual(f.read(), b"x")

if __name__ == "__main__":
    WS1CHECK = os.path.abspath(sys.argv.pop(1))
    ROOT = os.path.abspath(sys.argv.pop(1))
    SMOKE = os.path.join(ROOT, "fixtures", "ws1-smoke.json")
    unittest.main(verbosity=2)
