#!/usr/bin/python3
"""Oracle for the fixture generator: an independent Python implementation of docs/fixtures.md.

Usage: /usr/bin/python3 fixture_generator.py FIXTURE_TOOL SOURCE_ROOT

Re-implements, from the documented definition only, the stream key (SHA-256), SplitMix64,
the polar normal with its +,-,*,/,sqrt-only log, Student-t(3), unbiased uniform integers,
bf16 rounding and the invariance patterns, then compares bit for bit with lib/fixture (through
test/fixture/fixture_tool). Python floats are IEEE doubles with no fused operations, so the
same formula gives the same bits. Also checks the log against math.log and the normal's
moments (bounds from the sample size). Exit 0 when all agree.
"""
import hashlib
import json
import math
import os
import subprocess
import sys

import numpy as np

TOOL, ROOT = sys.argv[1], sys.argv[2]
VERSION = 'ws1-gen-v1'
M64 = (1 << 64) - 1
failures = []


def tool_bytes(*args):
    r = subprocess.run([TOOL, *map(str, args)], capture_output=True)
    if r.returncode != 0:
        raise SystemExit(f'fixture_tool {args} failed: {r.stderr.decode()}')
    return r.stdout


def stream_key(seed, key):
    return int.from_bytes(hashlib.sha256(f'{VERSION}\n{seed}\n{key}'.encode()).digest()[:8], 'big')


def mix64(key, counter):
    z = (key + (counter + 1) * 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def signed_unit(bits):
    return float(bits >> 11) * 2.0**-52 - 1.0


SQRT_HALF = float.fromhex('0x1.6a09e667f3bcdp-1')
LN2 = float.fromhex('0x1.62e42fefa39efp-1')


def det_log(s):
    m, e = math.frexp(s)          # exact: s = m * 2^e, m in [0.5, 1)
    if m < SQRT_HALF:
        m = m + m
        e -= 1
    t = (m - 1.0) / (m + 1.0)
    x = t * t
    x2 = x * x
    x4 = x2 * x2
    x8 = x4 * x4
    q0 = 1.0 + (1.0 / 3.0) * x
    q1 = 1.0 / 5.0 + (1.0 / 7.0) * x
    q2 = 1.0 / 9.0 + (1.0 / 11.0) * x
    q3 = 1.0 / 13.0 + (1.0 / 15.0) * x
    q4 = 1.0 / 17.0 + (1.0 / 19.0) * x
    r0 = q0 + q1 * x2
    r1 = q2 + q3 * x2
    p = (r0 + r1 * x4) + q4 * x8
    return float(e) * LN2 + 2.0 * t * p


def normal_pair(key, k):
    for j in range(128):
        c = (k * 128 + j) * 2
        u = signed_unit(mix64(key, c))
        v = signed_unit(mix64(key, c + 1))
        s = u * u + v * v
        if 0.0 < s < 1.0:
            f = math.sqrt(-2.0 * det_log(s) / s)
            return u * f, v * f
    return 0.0, 0.0


def normals(key, n):
    out = []
    for k in range((n + 1) // 2):
        out.extend(normal_pair(key, k))
    return out[:n]


def student_t3(key, n):
    z = normals(key, 4 * n)
    out = []
    for i in range(n):
        q = z[4 * i:4 * i + 4]
        chi = q[1] * q[1] + q[2] * q[2] + q[3] * q[3]
        out.append(q[0] / math.sqrt(chi / 3.0) if chi > 0.0 else 0.0)
    return out


def uniform_below(key, i, n):
    threshold = ((1 << 64) - n) % n
    high = 0
    for j in range(64):
        m = mix64(key, i * 64 + j) * n
        high = m >> 64
        if (m & M64) >= threshold:
            break
    return high


def bf16_bits(values):
    """double -> float32 (round to nearest even) -> bf16 (round to nearest even)."""
    f = np.asarray(values, dtype=np.float64).astype(np.float32)
    b = f.view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def compare(name, got_bytes, want, dtype):
    got = np.frombuffer(got_bytes, dtype=dtype)
    want = np.asarray(want, dtype=dtype)
    if got.shape != want.shape or not np.array_equal(got, want):
        idx = int(np.argmax(got != want)) if got.shape == want.shape else -1
        failures.append(f'{name}: differs (n={want.size}, got {got.size}; first index {idx})')
    else:
        print(f'{name}: {want.size} elements bit-identical')


SEED = 20260812
# Raw generator kinds.
for key, n in [('oracle/normal', 4099), ('oracle/normal-2', 1)]:
    compare(f'normal {key}', tool_bytes('gen', 'normal', SEED, key, n),
            bf16_bits(normals(stream_key(SEED, key), n)), np.uint16)
compare('student_t3', tool_bytes('gen', 'student_t3', SEED, 'oracle/t3', 1001),
        bf16_bits(student_t3(stream_key(SEED, 'oracle/t3'), 1001)), np.uint16)
for high in [151936, 3, 1, 2**40 + 7]:
    k = stream_key(SEED, 'oracle/ids')
    compare(f'uniform_int high={high}', tool_bytes('gen', 'uniform_int', SEED, 'oracle/ids', 2001, high),
            [uniform_below(k, i, high) for i in range(2001)], np.int64)
compare('param_pattern offset 5', tool_bytes('gen', 'param_pattern', SEED, 'unused', 3000, 5),
        bf16_bits([((i * 17 + 5 * 13) % 257 - 128) / 1024 for i in range(3000)]), np.uint16)

# Catalogue tensors of the smoke workload: a normal activation, a gradient seed (seed + 1000),
# uniform ids, and the invariance patterns built from the manifest's samples.
smoke = os.path.join(ROOT, 'fixtures', 'ws1-smoke.json')
man = json.load(open(smoke))
H = man['model_identity']['config_fingerprint']['hidden_size']
V = man['model_identity']['config_fingerprint']['vocab_size']
compare('rms_norm/primary/normal x', tool_bytes('raw', smoke, 'rms_norm/primary/normal', 'x'),
        bf16_bits(normals(stream_key(SEED, 'rms_norm/primary/normal/x'), 59 * H)), np.uint16)
compare('rms_norm/short/normal dy.y', tool_bytes('raw', smoke, 'rms_norm/short/normal', 'dy.y'),
        bf16_bits(normals(stream_key(SEED + 1000, 'rms_norm/short/normal/dy.y'), 8 * H)), np.uint16)
compare('rms_norm/primary/normal weight', tool_bytes('raw', smoke, 'rms_norm/primary/normal', 'weight'),
        bf16_bits(normals(stream_key(SEED, 'rms_norm.weight'), H)), np.uint16)
k = stream_key(SEED, 'embedding/short/normal/ids')
compare('embedding/short/normal ids', tool_bytes('raw', smoke, 'embedding/short/normal', 'ids'),
        [uniform_below(k, i, V) for i in range(8)], np.int64)

samples = {s['sample_id']: s for s in man['fixtures']['samples']}
rows = []
for sid in man['primary_matrix']['sample_ids']:
    s = samples[sid]
    ordv = sum(ord(c) for c in sid)
    for p in range(s['seq_len']):
        rows.append((ordv, p, p >= s['prompt_len']))


def token_pattern(width, offset, active_only=False):
    vals = []
    for ordv, pos, active in rows:
        for i in range(width):
            if active_only and not active:
                vals.append(0.0)
            else:
                vals.append(((i + ordv * 17 + pos * 13 + offset * 11) % 257 - 128) / 1024)
    return vals


compare('swiglu/invariance/pattern up', tool_bytes('raw', smoke, 'swiglu/invariance/pattern', 'up'),
        bf16_bits(token_pattern(man['model_identity']['config_fingerprint']['intermediate_size'], 1)),
        np.uint16)
compare('rms_norm/invariance/pattern dy.y', tool_bytes('raw', smoke, 'rms_norm/invariance/pattern', 'dy.y'),
        bf16_bits(token_pattern(H, 3, active_only=True)), np.uint16)
compare('rms_norm/invariance/pattern weight', tool_bytes('raw', smoke, 'rms_norm/invariance/pattern', 'weight'),
        bf16_bits([((i * 17 + 13) % 257 - 128) / 1024 for i in range(H)]), np.uint16)

# The log against math.log (accuracy, not identity: math.log is correctly rounded or nearly).
rng = np.random.default_rng(1)
worst = 0.0
for s in list(rng.random(20000)) + [2.0**-106, 0.5, 0.7071067811865476, 0.9999999999999999, 1e-300]:
    s = float(s)
    if s <= 0.0:
        continue
    ref = math.log(s)
    worst = max(worst, abs(det_log(s) - ref) / max(abs(ref), 1e-300))
print(f'det_log: worst relative error {worst:.3g} against math.log')
if worst > 8 * 2.0**-52:
    failures.append(f'det_log relative error {worst} above 8 ulp')

# Moments of a large normal sample from the tool: mean and variance within 6 standard errors
# (se(mean) = 1/sqrt(n), se(var) = sqrt(2/n) for a standard normal; bf16 rounding adds a
# relative error below 2^-9 per value, far inside these bounds at this n).
n = 1 << 20
z = np.frombuffer(tool_bytes('gen', 'normal', SEED, 'oracle/moments', n), dtype=np.uint16)
x = (z.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
mean, var = x.mean(), x.var()
print(f'normal moments: mean {mean:.5f} (bound {6 / math.sqrt(n):.5f}), var {var:.5f} '
      f'(bound 1 +- {6 * math.sqrt(2 / n):.5f})')
if abs(mean) > 6 / math.sqrt(n) or abs(var - 1) > 6 * math.sqrt(2 / n):
    failures.append('normal moments outside 6 standard errors')

for f in failures:
    print('FAIL', f)
sys.exit(1 if failures else 0)
