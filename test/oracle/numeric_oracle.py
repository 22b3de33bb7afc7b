#!/usr/bin/python3
"""Independent oracle for ws1's float32 -> bf16/fp16 conversions and ULP distances.

usage: numeric_oracle.py NUMERIC_DUMP

References, computed here without ws1's code:
  * bf16: (a) integer rule on the float32 bits (keep the high half, round the low half to
    nearest, ties to the even high half); (b) nearest neighbour in the sorted table of all bf16
    values, decided by exact float64 comparison with the midpoint. Both must agree.
  * fp16: numpy's float32 -> float16 cast, and the same nearest-neighbour rule on the table of
    all fp16 values. Both must agree.
  * NaN: sign kept, quiet bit set, top payload bits kept (ws1's documented rule).
  * decode: bf16 -> float32 is the high half; fp16 -> float32 is numpy's cast.
  * ulp_distance: rank difference in the sorted table of distinct values (so +0 and -0 are one
    point, +-inf one past the largest finite); inputs not representable are first rounded with
    the reference rounding.
Exit 0 when everything matches bit for bit, 1 otherwise, 77 (skipped) without numpy.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy not available: skipped")
    sys.exit(77)

U32 = np.uint32
failures = 0


def report(name, ok, inputs, got, want, fmt_in="{:08x}", n_show=8):
    """Prints one summary line per check; on failure the first few differing cases."""
    global failures
    bad = np.flatnonzero(~ok)
    print(f"{name}: {ok.size} cases, {bad.size} mismatches")
    if bad.size:
        failures += 1
        for i in bad[:n_show]:
            print(f"  input {fmt_in.format(int(inputs[i]))}: got {int(got[i]):#x}, want {int(want[i]):#x}")


# ---------------------------------------------------------------- inputs (float32 bit patterns)
def build_inputs():
    rng = np.random.default_rng(20260812)
    parts = []
    highs = np.arange(1 << 16, dtype=U32) << U32(16)
    # Low halves: bf16 ties (0x8000) and their neighbours, fp16 ties in normal range (bit 12
    # is half of fp16's last place: 0x1000 with the kept bit 13 even, 0x3000 with it odd), and
    # a few patterns.
    lows = [0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff, 0x0fff, 0x1000, 0x1001, 0x1fff,
            0x2000, 0x2001, 0x2fff, 0x3000, 0x3001, 0x5555, 0xaaaa, 0xc000, 0xefff, 0xf000, 0xf001]
    for lo in lows:
        parts.append(highs | U32(lo))
    # fp16 midpoints (every pair of neighbouring positive fp16 values, including 65504 and the
    # overflow point 65536), exact in float32, with their float32 neighbours, both signs.
    t16 = fp16_table()
    mids = ((t16[:-1] + t16[1:]) / 2).astype(np.float32)
    assert np.all(mids.astype(np.float64) == (t16[:-1] + t16[1:]) / 2)
    mb = mids.view(U32)
    for delta in (-1, 0, 1):
        m = (mb.astype(np.int64) + delta).astype(U32)
        parts += [m, m | U32(0x80000000)]
    # Random bit patterns, and random values around the fp16 subnormal range (2^-26 .. 2^-14).
    parts.append(rng.integers(0, 1 << 32, size=1 << 20, dtype=np.uint64).astype(U32))
    parts.append(rng.integers(0x32800000, 0x38800000, size=1 << 18, dtype=np.uint64).astype(U32)
                 | (rng.integers(0, 2, size=1 << 18, dtype=np.uint64).astype(U32) << U32(31)))
    # Special values: zeros, float32 subnormals, infinities, quiet and signaling NaNs.
    parts.append(np.array([0, 0x80000000, 1, 0x80000001, 0x8000, 0x8001, 0x18000, 0x7fffff,
                           0x807fffff, 0x7f800000, 0xff800000, 0x7f800001, 0xff800001,
                           0x7f801fff, 0x7f802000, 0x7fbfffff, 0x7fc00000, 0xffc00000,
                           0x7fffffff, 0xffffffff, 0x7f7fffff, 0x7f7f8000, 0x7f7f7fff,
                           0x477ff000, 0x477fefff, 0x477fe000], dtype=U32))
    return np.concatenate(parts)


def bf16_table():
    """All positive finite bf16 values by encoding, as float64, plus 2^128 standing for +inf
    at index 0x7f80 (which is +inf's encoding)."""
    v = (np.arange(0x7f80, dtype=U32) << U32(16)).view(np.float32).astype(np.float64)
    return np.append(v, 2.0 ** 128)


def fp16_table():
    """All positive finite fp16 values by encoding, as float64, plus 65536 standing for +inf at
    index 0x7c00 (RNE with an unbounded exponent rounds to 65536 from 65520 on)."""
    v = np.arange(0x7c00, dtype=np.uint16).view(np.float16).astype(np.float64)
    return np.append(v, 65536.0)


def nearest_even(x_bits, table):
    """RNE by table lookup for finite non-NaN float32 inputs: the index of the nearest table
    value, ties to the even index (index parity = last mantissa bit). Exact: the midpoint of
    two neighbours and the comparison with it are exact in float64."""
    x = x_bits.view(np.float32).astype(np.float64)
    ax = np.abs(x)
    last = table.size - 1
    i = np.clip(np.searchsorted(table, ax, side="right") - 1, 0, last)
    j = np.minimum(i + 1, last)
    mid = (table[i] + table[j]) / 2
    up = (j > i) & ((ax > mid) | ((ax == mid) & (i % 2 == 1)))
    r = np.where(up, j, i).astype(np.uint64)
    sign = ((x_bits >> U32(31)).astype(np.uint64)) << np.uint64(15)
    return (r | sign).astype(np.uint16)


def is_nan32(b):
    return (b & U32(0x7fffffff)) > U32(0x7f800000)


def bf16_ref_int(b):
    hi = (b >> U32(16)).astype(np.uint32)
    lo = b & U32(0xffff)
    up = (lo > 0x8000) | ((lo == 0x8000) & ((hi & U32(1)) == 1))
    r = hi + up.astype(U32)
    r = np.where(is_nan32(b), hi | U32(0x40), r)
    return r.astype(np.uint16)


def bf16_ref_table(b):
    r = nearest_even(np.where(is_nan32(b), U32(0), b), bf16_table())
    return np.where(is_nan32(b), bf16_ref_int(b), r).astype(np.uint16)


def fp16_nan_rule(b):
    return (((b >> U32(16)) & U32(0x8000)) | U32(0x7e00) | ((b >> U32(13)) & U32(0x3ff))).astype(np.uint16)


def fp16_ref_numpy(b):
    with np.errstate(over="ignore", invalid="ignore"):
        r = b.view(np.float32).astype(np.float16).view(np.uint16)
    return np.where(is_nan32(b), fp16_nan_rule(b), r).astype(np.uint16)


def fp16_ref_table(b):
    r = nearest_even(np.where(is_nan32(b), U32(0), b), fp16_table())
    return np.where(is_nan32(b), fp16_nan_rule(b), r).astype(np.uint16)


def run(dump, *args):
    subprocess.run([dump, *args], check=True)


def check_convert(dump, tmp):
    x = build_inputs()
    fin, fout = os.path.join(tmp, "in.u32"), os.path.join(tmp, "out.u16")
    x.astype("<u4").tofile(fin)
    run(dump, "convert", fin, fout)
    out = np.fromfile(fout, dtype="<u2")
    assert out.size == 2 * x.size, "numeric_dump convert: wrong output size"
    got_b, got_h = out[: x.size], out[x.size:]

    rb_int, rb_tab = bf16_ref_int(x), bf16_ref_table(x)
    report("bf16 reference self-check (integer rule vs table)", rb_int == rb_tab, x, rb_tab, rb_int)
    report("to_bf16 vs integer rule", got_b == rb_int, x, got_b, rb_int)
    report("to_bf16 vs nearest-in-table", got_b == rb_tab, x, got_b, rb_tab)

    rh_np, rh_tab = fp16_ref_numpy(x), fp16_ref_table(x)
    report("fp16 reference self-check (numpy vs table)", rh_np == rh_tab, x, rh_tab, rh_np)
    report("to_fp16 vs numpy float16", got_h == rh_np, x, got_h, rh_np)
    report("to_fp16 vs nearest-in-table", got_h == rh_tab, x, got_h, rh_tab)

    # NaN classification of the outputs, stated on its own: NaN in -> quiet NaN out, sign kept.
    nan = is_nan32(x)
    sign16 = ((x >> U32(16)) & U32(0x8000)).astype(np.uint16)
    ok_b = ((got_b & 0x7fff) > 0x7f80) & ((got_b & 0x40) != 0) & ((got_b & 0x8000) == sign16)
    ok_h = ((got_h & 0x7fff) > 0x7c00) & ((got_h & 0x200) != 0) & ((got_h & 0x8000) == sign16)
    report("to_bf16 NaN -> quiet NaN, sign kept", ok_b[nan], x[nan], got_b[nan], rb_int[nan])
    report("to_fp16 NaN -> quiet NaN, sign kept", ok_h[nan], x[nan], got_h[nan], rh_np[nan])
    return rb_int, rh_np, x


def check_decode(dump, tmp):
    fout = os.path.join(tmp, "decode.u32")
    run(dump, "decode", fout)
    out = np.fromfile(fout, dtype="<u4")
    assert out.size == 2 * 65536, "numeric_dump decode: wrong output size"
    got_b, got_h = out[:65536], out[65536:]
    codes = np.arange(65536, dtype=U32)
    report("from_bf16 == high half", got_b == (codes << U32(16)), codes, got_b, codes << U32(16),
           "{:04x}")
    h = codes.astype(np.uint16)
    want = h.view(np.float16).astype(np.float32).view(U32)
    hnan = (h & 0x7fff) > 0x7c00
    # NaN: payload kept bit for bit (numpy may quiet a signaling NaN; ws1 documents exactness).
    want_nan = ((codes & U32(0x8000)) << U32(16)) | U32(0x7f800000) | ((codes & U32(0x3ff)) << U32(13))
    want = np.where(hnan, want_nan, want)
    report("from_fp16 vs numpy float16 -> float32", got_h == want, codes, got_h, want, "{:04x}")
    report("from_fp16 NaN stays NaN", is_nan32(got_h[hnan]), codes[hnan], got_h[hnan], want[hnan],
           "{:04x}")


def ranks_reference(values64):
    """Rank of each value among the distinct values of a format (np.unique merges -0 and +0)."""
    distinct = np.unique(values64[~np.isnan(values64)])
    return lambda v: np.searchsorted(distinct, v)


def check_ulp(dump, tmp, x):
    rng = np.random.default_rng(7)
    n = 1 << 18
    all_b = (np.arange(65536, dtype=U32) << U32(16))
    all_h = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32).view(U32)
    formats = {
        "BF16": (all_b, bf16_ref_int),
        "F16": (all_h, fp16_ref_numpy),
    }
    for name, (codes32, round_ref) in formats.items():
        with np.errstate(invalid="ignore"):  # widening signaling NaNs
            rank = ranks_reference(codes32.view(np.float32).astype(np.float64))
        # Pairs: random codes, neighbours (code, code + 1), and arbitrary float32 inputs.
        a = codes32[rng.integers(0, 65536, size=n)]
        b = codes32[rng.integers(0, 65536, size=n)]
        k = rng.integers(0, 65535, size=n)
        a = np.concatenate([a, codes32[k], x[:n], np.array([0, 0x80000000], U32)])
        b = np.concatenate([b, codes32[k + 1], x[n:2 * n], np.array([0x80000000, 0], U32)])
        fin, fout = os.path.join(tmp, "ulp.in"), os.path.join(tmp, "ulp.out")
        np.stack([a, b], axis=1).astype("<u4").tofile(fin)
        run(dump, "ulp", name, fin, fout)
        got = np.fromfile(fout, dtype="<u8")
        # Reference: round with the reference rounding, decode, rank difference.
        if name == "BF16":
            dec = lambda c: (c.astype(U32) << U32(16)).view(np.float32).astype(np.float64)
        else:
            dec = lambda c: c.view(np.float16).astype(np.float64)
        va, vb = dec(round_ref(a)), dec(round_ref(b))
        nan = np.isnan(va) | np.isnan(vb)
        want = np.abs(rank(np.where(nan, 0, va)).astype(np.int64)
                      - rank(np.where(nan, 0, vb)).astype(np.int64)).astype(np.uint64)
        want = np.where(nan, np.uint64(2**64 - 1), want)
        report(f"ulp_distance {name}", got == want, a, got, want)

    # F32 and F64: the same idea with bit arithmetic on the wider formats (no table possible).
    # Pairs: random inputs (mixed signs and magnitudes), bit neighbours, +-0 and +-inf.
    a = x[rng.integers(0, x.size, size=n)]
    b = x[rng.integers(0, x.size, size=n)]
    k = x[rng.integers(0, x.size, size=n)] & U32(0x7f7fffff)
    special = np.array([0, 0x80000000, 0x7f800000, 0xff800000, 1, 0x80000001], U32)
    a = np.concatenate([a, k, np.repeat(special, special.size)])
    b = np.concatenate([b, k + U32(1), np.tile(special, special.size)])
    for name in ("F32", "F64"):
        fin, fout = os.path.join(tmp, "ulp.in"), os.path.join(tmp, "ulp.out")
        np.stack([a, b], axis=1).astype("<u4").tofile(fin)
        run(dump, "ulp", name, fin, fout)
        got = np.fromfile(fout, dtype="<u8")
        fa, fb = a.view(np.float32), b.view(np.float32)
        nan = np.isnan(fa) | np.isnan(fb)
        if name == "F32":
            ia, ib = a.astype(np.int64), b.astype(np.int64)
            mag = np.int64(0x7fffffff)
        else:
            with np.errstate(invalid="ignore"):  # widening signaling NaNs
                ia = fa.astype(np.float64).view(np.uint64).astype(object)
                ib = fb.astype(np.float64).view(np.uint64).astype(object)
            mag = 0x7fffffffffffffff
        def ordinal(i):
            m = i & mag
            return np.where(i != m, -m, m)
        want = np.abs(ordinal(ia) - ordinal(ib))
        want = np.array([int(w) for w in want], dtype=np.uint64)
        want = np.where(nan, np.uint64(2**64 - 1), want)
        report(f"ulp_distance {name}", got == want, a, got, want)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    dump = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        rb, rh, x = check_convert(dump, tmp)
        check_decode(dump, tmp)
        check_ulp(dump, tmp, x)
    print("numeric oracle:", "FAILED" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
