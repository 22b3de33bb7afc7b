#!/usr/bin/env python3
"""Validates contract files against contracts/contract.schema.json (JSON Schema 2020-12), and
checks that a few malformed edits of the first file are rejected by the schema too.

usage: validate_schema.py SCHEMA CONTRACT...   (exit 77 = skipped: no jsonschema module)
"""
import copy
import json
import sys

try:
    import jsonschema
except ImportError:
    print("jsonschema is not installed: skipped")
    sys.exit(77)


def main():
    schema_path, files = sys.argv[1], sys.argv[2:]
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    failures = 0
    docs = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        docs.append(doc)
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        for e in errors:
            print(f"{path}: {'.'.join(map(str, e.path))}: {e.message}")
        failures += len(errors)
        print(f"{path}: {'valid' if not errors else 'INVALID'}")

    # Edits the loader rejects and the schema can express; each must make the document invalid.
    def edit(fn):
        d = copy.deepcopy(docs[0])
        fn(d)
        return d

    fa = lambda d: d["judgments"]["forward_accuracy"]["by_op_class"]
    fi = lambda d: d["judgments"]["forward_invariance"]["by_op_class"]
    bad = {
        "unknown op class": edit(lambda d: fa(d).__setitem__("softmax", fa(d)["attention"])),
        "negative atol": edit(lambda d: fa(d)["reduction"]["bfloat16"].__setitem__(
            "atol", -fa(d)["reduction"]["bfloat16"]["atol"])),
        "bitwise row with rtol": edit(lambda d: fi(d)["elementwise"]["float32"].__setitem__(
            "rtol", fa(d)["elementwise"]["float32"]["rtol"])),
        "invariance row in tolerance mode": edit(
            lambda d: fi(d)["logprob"]["bfloat16"].__setitem__("mode", "tolerance")),
        "unknown key in row": edit(lambda d: fa(d)["logprob"]["float32"].__setitem__("atoll", 0)),
        "missing required row": edit(lambda d: fa(d)["attention"].pop("bfloat16")),
        "unknown version": edit(lambda d: d.__setitem__("version", "ws1-c1-v9")),
        "relaxation true": edit(lambda d: d["policy"].__setitem__(
            "backend_private_tolerance_relaxation", True)),
        "clip interval without 1": edit(lambda d: d["chain_logprob_aggregates"].__setitem__(
            "default_clip_interval", [d["chain_logprob_aggregates"]["default_clip_interval"][1]] * 2)),
        "unknown chain metric": edit(lambda d: d["chain_logprob_aggregates"]["metrics"].__setitem__(
            "p99_dlogp", d["chain_logprob_aggregates"]["metrics"]["max_abs_dlogp"])),
        "ws1check namespace typo": edit(lambda d: d.__setitem__("ws1check_declaration", {})),
    }
    if "ws1check_declarations" in docs[0]:
        de = lambda d: d["ws1check_declarations"]
        bad.update({
            "k_shards 0": edit(lambda d: de(d)["det_gemm_k_split"].__setitem__("shards", 0)),
            "bf16 partials": edit(lambda d: de(d)["det_gemm_k_split"].__setitem__("partial_dtype", "bfloat16")),
            "unknown rounding order": edit(lambda d: de(d)["rms_norm_rounding"].__setitem__("order", "fast")),
            "unknown nan policy": edit(lambda d: de(d)["invariance"].__setitem__("nan_policy", "ignore")),
            "unknown op": edit(lambda d: de(d)["op_classes"].__setitem__("rmsnorm", "reduction")),
        })
    for name, doc in bad.items():
        if validator.is_valid(doc):
            print(f"schema accepts a malformed contract: {name}")
            failures += 1
    print(f"{len(bad)} malformed edits checked")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
