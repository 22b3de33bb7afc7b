#!/usr/bin/python3
"""Oracle for the manifest identity hash and the canonical JSON behind it.

Usage: /usr/bin/python3 fixture_identity.py FIXTURE_TOOL SOURCE_ROOT

Python's own json.dumps(sort_keys=True, separators=(',', ':'), ensure_ascii=True) is the
definition upstream uses; this script computes it independently and compares, byte for byte,
with what lib/fixture computes (through test/fixture/fixture_tool):
  1. the identity of every manifest we ship or read (smoke, qwen3, upstream v7/v8), and that it
     equals the stored fixture_identity_sha256;
  2. the canonical text of random JSON documents (floats over the whole double range,
     integers at the 64-bit edges, non-ASCII and astral strings, control characters, nesting);
  3. Python's float repr for random and edge-case doubles.
Exit 0 when everything agrees, 1 otherwise (the first differences are printed).
"""
import hashlib
import json
import os
import random
import struct
import subprocess
import sys
import tempfile

TOOL, ROOT = sys.argv[1], sys.argv[2]
failures = []


def tool(*args, stdin=None):
    r = subprocess.run([TOOL, *args], input=stdin, capture_output=True)
    if r.returncode != 0:
        raise SystemExit(f'fixture_tool {args[0]} failed: {r.stderr.decode()}')
    return r.stdout


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(',', ':'), ensure_ascii=True)


# 1. identities
for rel in ['fixtures/ws1-smoke.json', 'fixtures/ws1-qwen3-8b-dense.json',
            'test/data/upstream/ws1_manifest.json', 'test/data/upstream/ws1_manifest.v7.derived.json']:
    path = os.path.join(ROOT, rel)
    m = json.load(open(path, encoding='utf-8'))
    body = {k: v for k, v in m.items() if k != 'fixture_identity_sha256'}
    want = hashlib.sha256(canonical(body).encode('utf-8')).hexdigest()
    got = tool('identity', path).decode().strip()
    if got != want:
        failures.append(f'{rel}: identity ours {got} python {want}')
    if m['fixture_identity_sha256'] != want:
        failures.append(f'{rel}: stored identity {m["fixture_identity_sha256"]} python {want}')
    print(f'{rel}: {want}')

# 2. canonical JSON of random documents
rng = random.Random(20260812)
EDGE_FLOATS = [0.0, -0.0, 1e16, 9999999999999998.0, 1e-4, 9.999999999999999e-05, 1e-05, 0.1,
               1 / 3, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1000000.0, 1e-06,
               123456789012345.6, 1e22, 1.5e300, -2.5e-10, 0.8, 1.2]
ALPHABET = ['a', 'Z', ' ', '"', '\\', '/', '\n', '\r', '\t', '\b', '\f', '\x00', '\x01', '\x1f',
            '\x7f', '\x80', '\u00e9', '\u00d7', '\u2028', '\ud7ff', '\ue000', '\uffff',
            '\U0001f600', '\U0010ffff', '~']


def rand_float():
    if rng.random() < 0.3:
        return rng.choice(EDGE_FLOATS) * rng.choice([1, -1])
    while True:
        x = struct.unpack('<d', struct.pack('<Q', rng.getrandbits(64)))[0]
        if x == x and abs(x) != float('inf'):
            return x


def rand_str():
    return ''.join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 8)))


def rand_value(depth):
    r = rng.random()
    if depth > 3 or r < 0.5:
        kind = rng.randint(0, 6)
        if kind == 0:
            return rand_float()
        if kind == 1:
            return rng.choice([0, 1, -1, 2**63 - 1, -2**63, 2**64 - 1, rng.randint(-10**12, 10**12)])
        if kind == 2:
            return rand_str()
        return [True, False, None, 7][kind - 3]
    if r < 0.75:
        return [rand_value(depth + 1) for _ in range(rng.randint(0, 5))]
    return {rand_str(): rand_value(depth + 1) for _ in range(rng.randint(0, 6))}


with tempfile.TemporaryDirectory() as tmp:
    for n in range(200):
        doc = {rand_str(): rand_value(0) for _ in range(8)}
        path = os.path.join(tmp, f'doc{n}.json')
        with open(path, 'w', encoding='utf-8') as f:
            f.write(json.dumps(doc, ensure_ascii=(n % 2 == 0), indent=(n % 3) or None))
        want = canonical(doc).encode('ascii')
        got = tool('canonical', path)
        if got != want:
            failures.append(f'canonical doc{n}: ours {got[:200]!r} python {want[:200]!r}')
            break
print('canonical: 200 random documents compared')

# 3. float repr
values = EDGE_FLOATS + [rand_float() for _ in range(20000)]
values += [float(f'{rng.randint(1, 9)}e{e}') for e in range(-330, 309)]
values = [v for v in values if v == v and abs(v) != float('inf')]
out = tool('repr', stdin=''.join(v.hex() + '\n' for v in values).encode()).decode().split('\n')
bad = [(v, o) for v, o in zip(values, out) if repr(v) != o]
if len(out) - 1 != len(values):
    failures.append(f'repr: {len(values)} values in, {len(out) - 1} lines out')
for v, o in bad[:10]:
    failures.append(f'repr({v.hex()}): ours {o} python {v!r}')
print(f'repr: {len(values)} doubles compared, {len(bad)} differ')

for f in failures[:20]:
    print('FAIL', f)
sys.exit(1 if failures else 0)
