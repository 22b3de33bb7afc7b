#!/usr/bin/python3
"""numpy interop oracle for ws1's safetensors reader and writer.

Usage: safetensors_interop.py SAFETENSORS_TOOL

An independent implementation of the safetensors format with numpy + json (no `safetensors`
package): it writes a file with every ws1 dtype (bf16 as uint16 bit patterns, incl. NaN
payloads, infinities, -0 and subnormals), 0-rank and zero-size tensors and metadata, laid out
in a non-canonical order; the C++ tool dumps it (names, dtypes, shapes, offsets, SHA-256 of
each tensor's bytes) and copies it; this script then reads the copy with its own strict reader
and compares every byte and value, and checks the copy equals its own canonical writer's
output byte for byte. Also: a malformed file makes the tool fail with exit code 2 and one line
naming the file, and leaves no output file.

Exit codes: 0 pass, 1 failure, 77 skipped (numpy missing).
"""
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy is not available: skipped")
    sys.exit(77)

# safetensors dtype -> little-endian numpy dtype (BF16 carried as raw uint16 bits).
NP = {
    "BF16": np.dtype("<u2"), "F16": np.dtype("<f2"), "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"), "I32": np.dtype("<i4"), "I64": np.dtype("<i8"),
    "BOOL": np.dtype("?"), "U8": np.dtype("u1"),
}
# The reference writer's data order: descending dtype alignment (its enum order), then name.
RANK = {"I64": 0, "F64": 1, "F32": 2, "I32": 3, "BF16": 4, "F16": 5, "U8": 6, "BOOL": 7}

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def header_json(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def build(tensors, metadata, order, key_order=None, metadata_last=False):
    """File bytes: data laid out in `order` (names); header keys in `key_order`."""
    entries, blobs, offset = {}, [], 0
    for name in order:
        dt, arr = tensors[name]
        blob = np.array(arr, dtype=NP[dt], order="C").tobytes()
        entries[name] = {"dtype": dt, "shape": list(arr.shape),
                         "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header = {}
    if metadata and not metadata_last:
        header["__metadata__"] = dict(sorted(metadata.items()))
    for name in (key_order or order):
        header[name] = entries[name]
    if metadata and metadata_last:
        header["__metadata__"] = dict(sorted(metadata.items()))
    text = header_json(header)
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def canonical(tensors, metadata):
    order = sorted(tensors, key=lambda n: (RANK[tensors[n][0]], n.encode("utf-8")))
    return build(tensors, metadata, order)


def strict_read(raw):
    """Our own reader, the format rules asserted: (metadata, {name: (dtype, array, begin)})."""
    assert len(raw) >= 8, "file shorter than 8 bytes"
    (n,) = struct.unpack("<Q", raw[:8])
    assert n <= 100_000_000 and 8 + n <= len(raw), "bad header length"
    text = raw[8:8 + n].decode("utf-8")
    assert text.startswith("{") and text.rstrip(" ").endswith("}"), "header framing"
    assert n % 8 == 0, "header not padded to a multiple of 8"

    def no_dups(pairs):
        keys = [k for k, _ in pairs]
        assert len(keys) == len(set(keys)), "duplicate keys"
        return dict(pairs)

    header = json.loads(text, object_pairs_hook=no_dups)
    metadata = header.pop("__metadata__", {})
    assert all(isinstance(v, str) for v in metadata.values()), "metadata not strings"
    out, spans = {}, []
    for name, e in header.items():
        assert name and set(e) == {"dtype", "shape", "data_offsets"}, name
        dt = NP[e["dtype"]]
        shape = tuple(e["shape"])
        assert all(isinstance(d, int) and d >= 0 for d in shape), name
        b, en = e["data_offsets"]
        assert en - b == int(np.prod(shape, dtype=np.int64)) * dt.itemsize, name
        arr = np.frombuffer(raw, dtype=dt, count=(en - b) // dt.itemsize,
                            offset=8 + n + b).reshape(shape)
        out[name] = (e["dtype"], arr, b)
        spans.append((b, en, name))
    pos = 0
    for b, en, name in sorted(spans):
        assert b == pos, "offsets do not tile the data section at " + name
        pos = en
    assert 8 + n + pos == len(raw), "trailing bytes or truncated data"
    return metadata, out


def make_tensors():
    rng = np.random.default_rng(20260812)
    specials = np.array([0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x7FC1, 0xFFFF, 0x0001,
                         0x8001, 0x007F, 0x3F80, 0xBF80, 0x7F7F, 0x0080], dtype=np.uint16)
    bf16 = np.concatenate([specials, rng.integers(0, 1 << 16, 7, dtype=np.uint16)]).reshape(3, 7)
    f16 = np.concatenate([np.array([np.nan, np.inf, -np.inf, -0.0, 6e-8, 65504.0],
                                   dtype=np.float16),
                          rng.standard_normal(14).astype(np.float16)]).reshape(4, 5)
    f32 = rng.standard_normal((2, 3, 4)).astype(np.float32)
    f32.flat[5] = np.float32(1e-45)
    f32.flat[6] = np.float32(-0.0)
    f64 = np.array([np.pi, -np.e, 1e-310, np.finfo(np.float64).max, np.nan], dtype=np.float64)
    i32 = np.array([0, -1, 1, 2**31 - 1, -2**31, 12345], dtype=np.int32)
    i64 = np.array([[2**63 - 1, -2**63], [-1, 42]], dtype=np.int64)
    return {
        "model.embed.weight_bf16": ("BF16", bf16),
        "layer.0.f16": ("F16", f16),
        "layer.0.f32": ("F32", f32),
        "scalar.f32": ("F32", np.array(2.5, dtype=np.float32)),
        "stats.f64": ("F64", f64),
        "ids.i32": ("I32", i32),
        "ids.i64": ("I64", i64),
        "mask": ("BOOL", np.array([True, False, True, True, False, False, True, False, True])),
        "bytes.u8": ("U8", rng.integers(0, 256, (3, 3), dtype=np.uint8)),
        "empty.f64": ("F64", np.zeros((0, 3), dtype=np.float64)),
        "empty.bf16": ("BF16", np.zeros((0,), dtype=np.uint16)),
        "scalar.i64": ("I64", np.array(-7, dtype=np.int64)),
    }


def run(tool, *args):
    return subprocess.run([tool, *args], capture_output=True, text=True)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    tool = sys.argv[1]
    tensors = make_tensors()
    metadata = {"format": "pt", "note": "\u03bb \"quoted\"\nline", "empty": ""}

    with tempfile.TemporaryDirectory(prefix="ws1-st-oracle-") as tmp:
        src = os.path.join(tmp, "numpy.safetensors")
        dst = os.path.join(tmp, "ws1.safetensors")
        # Non-canonical: data in reverse name order, header keys in another order, metadata last.
        names = sorted(tensors)
        raw_src = build(tensors, metadata, order=names[::-1], key_order=names,
                        metadata_last=True)
        with open(src, "wb") as f:
            f.write(raw_src)
        src_meta, src_tensors = strict_read(raw_src)  # the oracle reads its own file first

        # 1. ws1 reads the numpy file: names, dtypes, shapes, offsets and bytes.
        r = run(tool, "dump", src)
        check(r.returncode == 0, "dump of the numpy file failed: " + r.stderr.strip())
        if r.returncode == 0:
            dump = json.loads(r.stdout)
            check(dump["metadata"] == metadata, "dump: metadata differs")
            got = {t["name"]: t for t in dump["tensors"]}
            check(sorted(got) == names, "dump: tensor names differ")
            offsets = [got[n]["data_offsets"][0] for n in (t["name"] for t in dump["tensors"])]
            check(offsets == sorted(offsets), "dump: tensors not listed in file order")
            for name, (dt, arr) in tensors.items():
                t = got.get(name)
                if t is None:
                    continue
                check(t["dtype"] == dt, f"dump: {name} dtype {t['dtype']} != {dt}")
                check(tuple(t["shape"]) == arr.shape, f"dump: {name} shape {t['shape']}")
                blob = np.array(arr, dtype=NP[dt], order="C").tobytes()
                check(t["sha256"] == hashlib.sha256(blob).hexdigest(), f"dump: {name} bytes")
                b = src_tensors[name][2]
                check(t["data_offsets"] == [b, b + len(blob)], f"dump: {name} offsets")

        # 2. ws1 writes it back; the oracle reads what ws1 wrote.
        r = run(tool, "copy", src, dst)
        check(r.returncode == 0, "copy failed: " + r.stderr.strip())
        if r.returncode == 0:
            with open(dst, "rb") as f:
                raw_dst = f.read()
            try:
                dst_meta, dst_tensors = strict_read(raw_dst)
            except (AssertionError, ValueError, KeyError) as e:
                check(False, f"ws1's file fails the oracle's reader: {e!r}")
                dst_meta, dst_tensors = {}, {}
            check(dst_meta == metadata, "copy: metadata differs")
            check(sorted(dst_tensors) == names, "copy: tensor names differ")
            (n,) = struct.unpack("<Q", raw_dst[:8])
            for name, (dt, arr) in tensors.items():
                if name not in dst_tensors:
                    continue
                gdt, garr, begin = dst_tensors[name]
                check(gdt == dt, f"copy: {name} dtype")
                check(garr.shape == arr.shape, f"copy: {name} shape")
                want = np.array(arr, dtype=NP[dt], order="C")
                check(garr.tobytes() == want.tobytes(), f"copy: {name} bytes differ")
                if dt in ("F16", "F32", "F64"):
                    check(np.array_equal(garr, want, equal_nan=True), f"copy: {name} values")
                if dt == "BF16":  # as float32 values: bf16 bits are the high half of f32
                    as_f32 = (garr.astype(np.uint32) << 16).view(np.float32)
                    want_f32 = (want.astype(np.uint32) << 16).view(np.float32)
                    check(np.array_equal(as_f32, want_f32, equal_nan=True), f"copy: {name}")
                # canonical layout keeps every tensor aligned to its element size in the file
                check((8 + n + begin) % NP[dt].itemsize == 0, f"copy: {name} misaligned")
            # 3. ws1's file is the canonical layout, byte for byte.
            check(raw_dst == canonical(tensors, metadata),
                  "copy: bytes differ from the oracle's canonical writer")

        # 4. A malformed file: exit 2, one line naming the file and the field, no output.
        bad = os.path.join(tmp, "bad.safetensors")
        bad_out = os.path.join(tmp, "bad-copy.safetensors")
        with open(bad, "wb") as f:
            f.write(raw_src + b"\0\0\0")  # trailing bytes after the data
        r = run(tool, "copy", bad, bad_out)
        check(r.returncode == 2, f"malformed file: exit code {r.returncode}, expected 2")
        lines = r.stderr.strip().splitlines()
        check(len(lines) == 1 and lines[0].startswith(bad + ": byte ")
              and "trailing bytes" in lines[0], f"malformed file: message {r.stderr!r}")
        check(not os.path.exists(bad_out), "malformed file: an output file was written")
        leftovers = sorted(os.listdir(tmp))
        check(leftovers == ["bad.safetensors", "numpy.safetensors", "ws1.safetensors"],
              f"unexpected files left: {leftovers}")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print(f"safetensors interop: {len(tensors)} tensors, all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
