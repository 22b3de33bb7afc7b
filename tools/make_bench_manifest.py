#!/usr/bin/python3
"""Writes fixtures/ws1-bench-8k.json: the Qwen3-8B workload with its primary cases at 8192 tokens.

Usage: /usr/bin/python3 tools/make_bench_manifest.py [SRC] [OUT]

Maintenance script (run by hand; the result is checked in). `ws1check bench` times the kernels
on the primary/normal fixture of each op; this manifest is fixtures/ws1-qwen3-8b-dense.json with
the primary representative cases' token dimensions set to 8192 (a training micro-batch at full
model widths): T and M 59 -> 8192; attention prefill one sequence of 8192 (B 1, Sq = Skv 8192);
the decode case a single query against an 8192-token KV cache; logp rows B 4 x T 27 ->
B 1 x T 8192. Everything else (seed, samples, widths) is unchanged. It has no lock: its fixtures
are timed, never judged. The identity hash follows upstream's rule (canonical JSON minus the
hash field).
"""
import copy
import hashlib
import json
import sys

SRC = sys.argv[1] if len(sys.argv) > 1 else 'fixtures/ws1-qwen3-8b-dense.json'
OUT = sys.argv[2] if len(sys.argv) > 2 else 'fixtures/ws1-bench-8k.json'
TOKENS = 8192


def identity(m):
    body = {k: v for k, v in m.items() if k != 'fixture_identity_sha256'}
    text = json.dumps(body, sort_keys=True, separators=(',', ':'), ensure_ascii=True)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def scale(case):
    s = case['shape']
    if case['operator_spec'] == 'attention':
        if s.get('mode') == 'decode':
            s.update(B=1, Sq=1, Skv=TOKENS)
        else:
            s.update(B=1, Sq=TOKENS, Skv=TOKENS)
    elif 'M' in s:
        s['M'] = TOKENS
    elif 'B' in s and 'T' in s:
        s.update(B=1, T=TOKENS)
    elif 'T' in s:
        s['T'] = TOKENS
    s['note'] = f"Bench scale ({TOKENS} tokens) of {case['case_id']}."


def main():
    m = json.load(open(SRC))
    m['workload_id'] = 'ws1-bench-8k-v1'
    primary = m['fixtures']['representative_full_model_fixture']['fixture_id']
    long_id = m['fixtures']['long_full_model_fixture']['fixture_id']
    for c in m['representative_cases']:
        if c['fixture_id'] == primary or (c['operator_spec'] == 'attention' and c['shape'].get('mode') == 'decode'
                                          and c['fixture_id'] == long_id):
            scale(c)
    m['fixture_identity_sha256'] = identity(m)
    with open(OUT, 'w') as f:
        f.write(json.dumps(m, indent=2) + '\n')
    print(OUT, m['fixture_identity_sha256'])


if __name__ == '__main__':
    main()
