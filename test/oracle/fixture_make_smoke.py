#!/usr/bin/python3
"""Writes fixtures/ws1-smoke.json: the upstream v8 manifest's structure at CI-sized widths.

Usage: /usr/bin/python3 test/oracle/fixture_make_smoke.py [--gqa] [UPSTREAM_V8] [OUT]

--gqa writes fixtures/ws1-smoke-gqa.json instead: the same workload with 8 query heads / 2 kv
heads (Qwen3's ratio 4 with more than one kv head, so a wrong GQA head map can show; issue 19).

Maintenance script (run by hand when the smoke workload changes; the result is checked in).
The smoke workload keeps everything that defines the WS1 logical fixture (seed, samples s0..s3,
chunk size, permutation, padding, cells, tiers, ops) and shrinks the model widths:
hidden 64, intermediate 192, 4 query heads / 1 kv head (GQA 4), head_dim 16, vocab 256,
2 layers. Token ids are the upstream ids mod 256 (the primary samples are already below 256);
the pad token is the smallest id no fixture token uses (4; 151643 mod 256 = 91 would collide
with the long fixture). Profiles:
cuda_bf16 and triton_cuda_bf16 (upstream ids) plus cpu_bf16 (this project's CPU candidate).
Weights are synthetic: no shards, so content_hash is the SHA-256 of the empty record list.
The identity hash is computed by upstream's rule (canonical JSON minus the hash field).
"""
import copy
import hashlib
import json
import sys

GQA = '--gqa' in sys.argv[1:]
ARGS = [a for a in sys.argv[1:] if a != '--gqa']
SRC = ARGS[0] if len(ARGS) > 0 else 'test/data/upstream/ws1_manifest.json'
OUT = ARGS[1] if len(ARGS) > 1 else ('fixtures/ws1-smoke-gqa.json' if GQA else 'fixtures/ws1-smoke.json')

VOCAB, HIDDEN, INTER, HQ, HKV, HEAD_DIM, LAYERS = 256, 64, 192, 4, 1, 16, 2
if GQA:
    HQ, HKV = 8, 2
DIM_MAP = {'K': {4096: HIDDEN}, 'N': {4096: HIDDEN, 12288: INTER}, 'Hq': {32: HQ},
           'Hkv': {8: HKV}, 'D': {128: HEAD_DIM}, 'head_dim': {128: HEAD_DIM},
           'vocab': {151936: VOCAB}}
ID_MAP = [('k4096', f'k{HIDDEN}'), ('n12288', f'n{INTER}'), ('n4096', f'n{HIDDEN}'),
          ('vocab151936', f'vocab{VOCAB}')]


def identity(m):
    body = {k: v for k, v in m.items() if k != 'fixture_identity_sha256'}
    text = json.dumps(body, sort_keys=True, separators=(',', ':'), ensure_ascii=True)
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


def smoke_case(case, profile, backend_id, kernel_prefix):
    c = copy.deepcopy(case)
    cid = c['case_id']
    for a, b in ID_MAP:
        cid = cid.replace(a, b)
    if profile == 'cpu_bf16':
        cid = cid.replace('-cuda-', '-cpu-')
    c['case_id'] = cid
    for k, v in list(c['shape'].items()):
        if k in DIM_MAP and v in DIM_MAP[k]:
            c['shape'][k] = DIM_MAP[k][v]
    c['shape']['note'] = f"Smoke-width copy of upstream case {case['case_id']}."
    c['architecture_identity'] = 'ws1_smoke_synthetic'
    c['profile_ids'] = [profile]
    if backend_id is not None:
        kid = f"{kernel_prefix}.{c['operator_spec']}"
        c['expected_backend_id'] = c['actual_backend_id'] = backend_id
        c['expected_kernel_config_id'] = c['actual_kernel_config_id'] = kid
        c['provenance_evidence'] = {
            'kind': 'runtime_execution_via_ws1check',
            'registry': 'lib/backend',
            'candidate_name': backend_id,
            'resolved_path': kid,
            'algorithm_source': f"lib/ops/{c['operator_spec']}.cpp",
            'runtime_evidence_command': 'ws1check accuracy --backend cpu_bf16',
        }
    else:
        c['provenance_evidence']['runtime_evidence_command'] = (
            c['provenance_evidence']['runtime_evidence_command'].replace(case['case_id'], cid))
    return c


def main():
    src = json.load(open(SRC))
    m = copy.deepcopy(src)
    m['workload_id'] = 'ws1-smoke-gqa-v1' if GQA else 'ws1-smoke-v1'
    mi = m['model_identity']
    mi['model_id'] = 'ws1/qwen3-smoke-gqa-synthetic' if GQA else 'ws1/qwen3-smoke-synthetic'
    mi['hf_repo'] = 'none'
    mi['revision'] = 'synthetic'
    mi['exit_forbids_architecture_shrink'] = False
    cf = mi['config_fingerprint']
    cf.update(num_hidden_layers=LAYERS, hidden_size=HIDDEN, intermediate_size=INTER,
              num_attention_heads=HQ, num_key_value_heads=HKV, head_dim=HEAD_DIM,
              vocab_size=VOCAB, max_position_embeddings=128)
    mi['weight_snapshot'] = {
        'pin_method': 'synthetic_from_manifest_seed',
        'index_file': 'none',
        'index_sha256': '0' * 64,
        'tensor_total_size_bytes': 0,
        'weight_files_total_size_bytes': 0,
        'total_size_bytes': 0,
        'content_hash_algorithm': 'sha256-of-sorted-shard-records-v1',
        'content_hash': hashlib.sha256(b'').hexdigest(),
        'shards': [],
        'source': 'Synthetic smoke weights generated from the manifest seed; no checkpoint.',
    }

    fx = m['fixtures']
    for s in fx['samples']:
        s['token_ids'] = [t % VOCAB for t in s['token_ids']]
    for key in ('short_full_model_fixture', 'long_full_model_fixture'):
        fx[key]['token_ids'] = [t % VOCAB for t in fx[key]['token_ids']]
        fx[key]['note'] = 'Smoke widths; ' + fx[key]['note']
    used = {t for s in fx['samples'] for t in s['token_ids']}
    for key in ('short_full_model_fixture', 'long_full_model_fixture'):
        used.update(fx[key]['token_ids'])
    fx['padding']['pad_token_id'] = min(t for t in range(VOCAB) if t not in used)

    profiles = {'cpu_bf16': copy.deepcopy(src['backend_profiles']['cuda_bf16'])}
    profiles['cpu_bf16']['backend_family'] = 'cpu'
    for node in profiles['cpu_bf16']['required_nodes']:
        node['expected_backend_id'] = 'cpu_bf16'
        node['expected_kernel_config_id'] = f"ws1.cpu_bf16.{node['node']}"
    profiles['cuda_bf16'] = src['backend_profiles']['cuda_bf16']
    profiles['triton_cuda_bf16'] = src['backend_profiles']['triton_cuda_bf16']
    m['backend_profiles'] = profiles

    cases = []
    for c in src['representative_cases']:
        if c['profile_ids'] == ['cuda_bf16']:
            cases.append(smoke_case(c, 'cpu_bf16', 'cpu_bf16', 'ws1.cpu_bf16'))
    for c in src['representative_cases']:
        if c['profile_ids'] in (['cuda_bf16'], ['triton_cuda_bf16']):
            cases.append(smoke_case(c, c['profile_ids'][0], None, None))
    m['representative_cases'] = cases
    for key in ('short_full_model_fixture', 'long_full_model_fixture',
                'representative_full_model_fixture'):
        fid = fx[key]['fixture_id']
        fx[key]['candidate_case_ids'] = [c['case_id'] for c in cases if c['fixture_id'] == fid]

    m['fixture_identity_sha256'] = identity(m)
    with open(OUT, 'w') as f:
        f.write(json.dumps(m, indent=2) + '\n')
    print(OUT, m['fixture_identity_sha256'], len(cases), 'cases')


if __name__ == '__main__':
    main()
