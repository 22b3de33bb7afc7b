#!/usr/bin/env python3
"""Per-tensor error statistics of an `accuracy --dump` directory, for calibrating contract rows.

For every cand.<t> / ref.<t> pair in the dump's safetensors files (one per cell) it reports:
  max_abs      max |c - r|
  ref_peak     max |r|
  rel_peak     max |c - r| / max |r|                         (scale-free, peak-normalised)
  rel_rms      sqrt(mean((c - r)^2)) / sqrt(mean(r^2))       (scale-free, RMS-normalised)
  bias_ulp     mean over elements of the signed BF16 ulp distance of c from r rounded to BF16
               (the evidence's bias_ulp)
  bias_rms_ulp mean(c - r) / ulp_bf16(rms(r))                 (the signed error's mean, in BF16
               steps at the tensor's RMS magnitude)
  above, below the elements whose c lies above / below r rounded to BF16
  sign_excess  (|above - below| - 4 sqrt(above + below)) / n: how far the net count of elements on
               one side exceeds a 4-sigma chance allowance, as a fraction of the tensor
over the finite pairs, in float64. Usage:
  accuracy_statistics.py DUMP_DIR [--json OUT.json]
Prints one line per tensor (cell id, tensor, statistics) and writes them as JSON on request.

  accuracy_statistics.py --evidence FILE_OR_DIR... [--judgment J]
reads evidence artifacts instead (ws1check-evidence-v6: every accuracy tensor records max |c - r|
and max |r|) and prints, per backend, the largest rel_peak of the bf16 tensors of green or
vacuous cells (of judgment J, default gradient_accuracy) with its cell, and the count; the same
cell seen in several artifacts counts once.

  accuracy_statistics.py --relative FILE_OR_DIR...
reads ws1-c1-v3 evidence (tensors with a `relative` record) and prints, per backend and
judgment, the distribution of ratio = max |c - r| / max |naive - r| (the naive bf16 engine's
error; tensors whose naive error is 0 are counted apart): count, max, P99, P90, median, and the
largest (error - floor) / naive error, the factor each tensor would need without the floor.

  accuracy_statistics.py --bias FILE_OR_DIR...
reads ws1-c1-v3 evidence (tensors with a `bias` record) and prints, per backend and sign (drift:
c against q; growth: |c| against |q|), the number of tensors, the largest |mean| with its cell and
its z = sum / sqrt(pairs with the sign nonzero), the largest |mean| among tensors whose |z| > 6
(a lean beyond chance), and the tensors the rule failed.
"""
import json
import math
import os
import struct
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = np.frombuffer(data[lo:hi], dtype=np.uint8)
        dt = info["dtype"]
        if dt == "BF16":
            a = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        elif dt == "F32":
            a = raw.view(np.float32)
        elif dt == "F16":
            a = raw.view(np.float16).astype(np.float32)
        else:
            continue
        out[name] = (dt, a.reshape(info["shape"]) if info["shape"] else a)
    return out, header.get("__metadata__", {})


def round_bf16(x):
    """float32 -> nearest-even bfloat16, returned as float32 (finite inputs)."""
    b = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def bf16_ulp(x):
    """The BF16 step at |x| (the spacing of BF16 values in x's binade; subnormal floor)."""
    x = np.abs(np.asarray(x, dtype=np.float64))
    e = np.floor(np.log2(np.maximum(x, 2.0**-126)))
    return 2.0 ** (e - 7)


def ordered(bits):
    """BF16 bit patterns (as float32 values) -> integers ordered like the values."""
    u = (bits.view(np.uint32) >> 16).astype(np.int64)
    return np.where(u & 0x8000, -(u & 0x7FFF), u)


def stats(c, r):
    c = c.astype(np.float32).ravel()
    r = r.astype(np.float32).ravel()
    ok = np.isfinite(c) & np.isfinite(r)
    c, r = c[ok], r[ok]
    if c.size == 0:
        return None
    d = c.astype(np.float64) - r.astype(np.float64)
    rms_r = math.sqrt(float(np.mean(r.astype(np.float64) ** 2)))
    peak = float(np.max(np.abs(r)))
    sulp = ordered(c) - ordered(round_bf16(r))
    above, below = int(np.sum(sulp > 0)), int(np.sum(sulp < 0))
    s = {
        "numel": int(c.size),
        "above": above,
        "below": below,
        "sign_excess": (abs(above - below) - 4.0 * math.sqrt(above + below)) / c.size,
        "max_abs": float(np.max(np.abs(d))),
        "ref_peak": peak,
        "rel_peak": float(np.max(np.abs(d))) / peak if peak > 0 else (0.0 if not d.any() else math.inf),
        "rel_rms": math.sqrt(float(np.mean(d**2))) / rms_r if rms_r > 0 else (0.0 if not d.any() else math.inf),
        "bias_ulp": float(np.mean(sulp)),
        "bias_rms_ulp": float(np.mean(d)) / float(bf16_ulp(rms_r)) if rms_r > 0 else 0.0,
    }
    return s


def evidence_files(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            for root, _, names in os.walk(p):
                files += [os.path.join(root, n) for n in names if n.endswith(".json")]
        else:
            files.append(p)
    for f in sorted(files):
        try:
            with open(f) as fh:
                e = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(e, dict) and e.get("schema_version") == "ws1check-evidence-v6":
            yield f, e


def evidence_rel_peaks(paths, judgment):
    seen = {}
    for f, e in evidence_files(paths):
        for c in e.get("cells", []):
            if c.get("judgment") != judgment or c.get("verdict") not in ("green", "vacuous"):
                continue
            for t in c.get("tensors", []):
                if t.get("comparison") != "accuracy" or t.get("dtype") != "bfloat16":
                    continue
                peak, err = t.get("reference_max_abs"), t["abs_error"]["max"]
                if not isinstance(peak, (int, float)) or not isinstance(err, (int, float)) or peak <= 0:
                    continue
                key = (c["backend"]["actual"], c["fixture"]["hash"], c["id"], t["name"])
                seen[key] = (err / peak, f)
    by_backend = {}
    for (backend, _, cell, tensor), (rp, f) in seen.items():
        by_backend.setdefault(backend, []).append((rp, cell, tensor, f))
    for backend, rows in sorted(by_backend.items()):
        rows.sort(reverse=True)
        rp, cell, tensor, f = rows[0]
        print(f"{backend}: {len(rows)} tensors, max rel_peak {rp:.4g} ({cell} {tensor}, {f})")
    return 0


def tensor_records(paths, key):
    """(cell, tensor) of every accuracy tensor with a `key` record, the same cell seen in several
    artifacts once, keyed by (backend, judgment, fixture hash, cell id, tensor)."""
    seen = {}
    for _, e in evidence_files(paths):
        for c in e.get("cells", []):
            for t in c.get("tensors", []):
                if t.get(key) is not None:
                    seen[(c["backend"]["actual"], c["judgment"], c["fixture"]["hash"], c["id"], t["name"])] = (c, t)
    return seen


def evidence_relative(paths):
    seen = {k: (t["abs_error"]["max"], t["relative"]) for k, (_, t) in tensor_records(paths, "relative").items()}
    groups = {}
    for (backend, judgment, _, cell, tensor), (err, rel) in seen.items():
        groups.setdefault((backend, judgment), []).append((err, rel, cell, tensor))
    for (backend, judgment), rows in sorted(groups.items()):
        ratios = sorted((err / rel["naive_max_abs"], cell, tensor) for err, rel, cell, tensor in rows
                        if rel["naive_max_abs"] > 0)
        zero = [r for r in rows if r[1]["naive_max_abs"] == 0]
        need = max(((err - rel["floor"]) / rel["naive_max_abs"], cell, tensor) for err, rel, cell, tensor in rows
                   if rel["naive_max_abs"] > 0) if ratios else (0, "-", "-")
        failed = sum(1 for _, rel, _, _ in rows if not rel["passed"])
        v = np.array([r[0] for r in ratios]) if ratios else np.zeros(1)
        print(f"{backend} {judgment}: {len(rows)} tensors ({len(zero)} with naive error 0, {failed} over the bound); "
              f"ratio max {v.max():.3g} ({ratios[-1][1]} {ratios[-1][2]}) P99 {np.percentile(v, 99):.3g} "
              f"P90 {np.percentile(v, 90):.3g} median {np.median(v):.3g}; "
              f"largest factor needed without the floor {need[0]:.3g} ({need[1]} {need[2]})" if ratios else
              f"{backend} {judgment}: {len(rows)} tensors, naive error 0 on all")
    return 0


def evidence_bias(paths):
    groups = {}
    for (backend, _, _, cell, tensor), (_, t) in tensor_records(paths, "bias").items():
        b = t["bias"]
        for sign, plus, minus in (("drift", "above", "below"), ("growth", "away", "toward")):
            nonzero = b[plus] + b[minus]
            z = (b[plus] - b[minus]) / math.sqrt(nonzero) if nonzero else 0.0
            groups.setdefault((backend, sign), []).append((abs(b[sign]), b[sign], z, cell, tensor, b["passed"]))
    for (backend, sign), rows in sorted(groups.items()):
        rows.sort(reverse=True)
        _, mean, z, cell, tensor, _ = rows[0]
        beyond = [r for r in rows if abs(r[2]) > 6]
        failed = sorted({(r[3], r[4]) for r in rows if not r[5]})
        line = f"{backend} {sign}: {len(rows)} tensors; largest |mean| {mean:+.4f} (z {z:+.1f}, {cell} {tensor})"
        if beyond:
            b0 = beyond[0]
            line += f"; beyond z = 6: {len(beyond)}, the largest |mean| {b0[1]:+.4f} (z {b0[2]:+.1f}, {b0[3]} {b0[4]})"
        else:
            line += "; none beyond z = 6"
        print(line + (f"; failed: {failed}" if failed else ""))
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "--bias":
        return evidence_bias(argv[2:])
    if len(argv) >= 2 and argv[1] == "--relative":
        return evidence_relative(argv[2:])
    if len(argv) >= 2 and argv[1] == "--evidence":
        judgment = "gradient_accuracy"
        paths = argv[2:]
        if "--judgment" in paths:
            i = paths.index("--judgment")
            judgment = paths[i + 1]
            paths = paths[:i] + paths[i + 2:]
        return evidence_rel_peaks(paths, judgment)
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    rows = []
    for name in sorted(os.listdir(argv[1])):
        if not name.endswith(".safetensors"):
            continue
        tensors, meta = read_safetensors(os.path.join(argv[1], name))
        cell = meta.get("ws1.cell_id", name[: -len(".safetensors")])
        for key, (dt, c) in tensors.items():
            if not key.startswith("cand.") or dt != "BF16":
                continue
            t = key[len("cand."):]
            if "ref." + t not in tensors:
                continue
            s = stats(c, tensors["ref." + t][1])
            if s is None:
                continue
            s.update({"cell": cell, "tensor": t})
            rows.append(s)
            print("{cell} {tensor}: max_abs {max_abs:.4g} ref_peak {ref_peak:.4g} rel_peak {rel_peak:.4g} "
                  "rel_rms {rel_rms:.4g} bias_ulp {bias_ulp:+.4f} bias_rms_ulp {bias_rms_ulp:+.4f} above {above} below {below} "
                  "sign_excess {sign_excess:+.4f}".format(**s))
    if "--json" in argv:
        with open(argv[argv.index("--json") + 1], "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
