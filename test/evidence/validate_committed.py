#!/usr/bin/env python3
"""Validates every evidence artifact kept under evidence/ against contracts/evidence.schema.json
(JSON Schema 2020-12), each against the version it claims (docs/decisions.md D23), and shows that
the schema rejects what it must: a version label newer than the document's fields, an unknown
version. An engineer auditing months later must be able to validate any artifact we kept.

usage: validate_committed.py SCHEMA EVIDENCE_DIR   (exit 77 = skipped: no jsonschema module)
"""
import copy
import glob
import json
import os
import sys

try:
    import jsonschema
except ImportError:
    print("jsonschema is not installed: skipped")
    sys.exit(77)

EVIDENCE_PREFIX = "ws1check-evidence-"
# JSON files under evidence/ in other formats, by their version field; each is named so that a
# new, unknown format fails the test instead of being skipped silently.
OTHER_FORMATS = {
    "ws1-bench-v1": "`ws1check bench` output (its own format, key 'schema')",
    "ws1-c8-execute-v2": "the upstream C8 matrix format (the gate's c8-execute.json)",
    "ws1-gemm-peers-v1": "tools/bench/gemm_peers.py output (cuBLAS, a fixed-tile Triton GEMM and det_gemm in one run)",
    "ws1-peers-v1": "tools/bench/peers.py output (attention's peers: cuDNN and flash SDPA, flex_attention, in one run)",
}
# `ws1check env --json` prints the run context of an artifact (ws1::evidence_context_json): the
# artifact's schema_version, but none of these run keys and an empty workload (env runs none).
# It is no run's artifact and the schema is not loosened for it; its other keys (tool, checkout,
# command, contract, environment) are checked against the schema's definitions of them.
RUN_KEYS = ["started", "finished", "cells", "summary", "verdict"]
ENV_SKIPPED = RUN_KEYS + ["workload"]


def json_path(path):
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def first_error(validator, doc):
    """(count, 'json.path: message') of the most relevant error, or (0, None)."""
    errors = list(validator.iter_errors(doc))
    if not errors:
        return 0, None
    e = jsonschema.exceptions.best_match(errors)
    return len(errors), f"{json_path(e.absolute_path)}: {e.message[:300]}"


def version_of(doc):
    return str(doc.get("schema_version", doc.get("schema", "")))


def accuracy_tensors(doc):
    return [t for c in doc["cells"] for t in c["tensors"] if t.get("comparison") == "accuracy"]


def is_v3_shaped(doc):
    """Carries every field v3 requires: a cell reference everywhere, statistics_engine on every
    accuracy tensor (and has at least one)."""
    return (all("reference" in c for c in doc["cells"]) and accuracy_tensors(doc)
            and all("statistics_engine" in t for t in accuracy_tensors(doc)))


def main():
    schema_path, evidence_dir = sys.argv[1], sys.argv[2]
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    context_schema = copy.deepcopy(schema)
    context_schema["required"] = [k for k in schema["required"] if k not in ENV_SKIPPED]
    context_validator = jsonschema.Draft202012Validator(context_schema)

    files = sorted(glob.glob(os.path.join(evidence_dir, "**", "*.json"), recursive=True))
    if not files:
        print(f"{evidence_dir}: no JSON files (wrong directory?)")
        return 1
    failures, validated, artifacts = 0, 0, {}
    for path in files:
        name = os.path.relpath(path, os.path.dirname(evidence_dir.rstrip("/")))
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        version = version_of(doc)
        if version in OTHER_FORMATS:
            print(f"{name}: skipped, {version}: {OTHER_FORMATS[version]}")
            continue
        if not version.startswith(EVIDENCE_PREFIX):
            print(f"{name}: FAIL: unknown format '{version}' (add it to OTHER_FORMATS by name)")
            failures += 1
            continue
        context_only = doc.get("command", [None, None])[1:2] == ["env"] and not any(
            k in doc for k in RUN_KEYS)
        if context_only:
            doc = {k: v for k, v in doc.items() if k != "workload"}
        count, error = first_error(context_validator if context_only else validator, doc)
        if error:
            print(f"{name}: FAIL ({version}, {count} error(s)): {error}")
            failures += 1
            continue
        validated += 1
        if context_only:
            print(f"{name}: `ws1check env --json` output, not a run's artifact: its context keys "
                  f"valid ({version}); no {', '.join(RUN_KEYS)}; empty workload not checked")
        else:
            print(f"{name}: valid ({version})")
            artifacts[name] = doc

    # The test must be able to fail: edits of kept artifacts that the schema has to reject.
    v3_name = next((n for n, d in artifacts.items() if is_v3_shaped(d)), None)
    old_name = next((n for n, d in artifacts.items()
                     if d["cells"] and not all("reference" in c for c in d["cells"])), None)
    if v3_name is None or old_name is None:
        print("FAIL: no kept artifact with the v3 fields, or none without cells[].reference: the "
              "rejection checks below need one of each")
        return 1

    def relabeled(name, version, edit=lambda d: None):
        d = copy.deepcopy(artifacts[name])
        d["schema_version"] = version
        edit(d)
        return d

    def drop_engine(d):
        del accuracy_tensors(d)[0]["statistics_engine"]

    def drop_reference(d):
        del d["cells"][0]["reference"]

    def bad_reference(d):
        d["cells"][0]["reference"] = {"engine": ""}

    must_pass = {
        f"{v3_name} as v3": relabeled(v3_name, EVIDENCE_PREFIX + "v3"),
    }
    must_fail = {  # what -> (document, text the first error must contain)
        f"{v3_name} as v3 without one statistics_engine":
            (relabeled(v3_name, EVIDENCE_PREFIX + "v3", drop_engine), "'statistics_engine' is a required"),
        f"{v3_name} as v2 without one cell reference":
            (relabeled(v3_name, EVIDENCE_PREFIX + "v2", drop_reference), "'reference' is a required"),
        f"{old_name} (lacks cells[].reference) claiming v2":
            (relabeled(old_name, EVIDENCE_PREFIX + "v2"), "'reference' is a required"),
        f"{v3_name} as v4 (no cells[].timing)":
            (relabeled(v3_name, EVIDENCE_PREFIX + "v4"), "'timing' is a required"),
        f"{old_name} with an unknown version":
            (relabeled(old_name, EVIDENCE_PREFIX + "v7"), "$.schema_version"),
        f"{v3_name} as v1 with a malformed reference (shape checked in every version)":
            (relabeled(v3_name, EVIDENCE_PREFIX + "v1", bad_reference), "$.cells[0].reference"),
    }
    for what, doc in must_pass.items():
        count, error = first_error(validator, doc)
        if error:
            print(f"FAIL: schema rejects {what}: {error}")
            failures += 1
    for what, (doc, expect) in must_fail.items():
        count, error = first_error(validator, doc)
        if error is None or expect not in error:
            print(f"FAIL: schema does not reject {what} as expected ({expect!r}): {error}")
            failures += 1
        else:
            print(f"rejected as expected: {what}: {error[:160]}")

    print(f"{validated} evidence file(s) valid, {len(must_fail)} planted defects checked, "
          f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
