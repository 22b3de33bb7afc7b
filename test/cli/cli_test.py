#!/usr/bin/env python3
"""End-to-end tests of the ws1check binary: exit codes (DESIGN §8), one-line errors naming the
file and field, nothing half-written, env JSON, fixtures verify/export/import.

Usage: cli_test.py WS1CHECK SOURCE_ROOT   (stdlib only)
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

WS1CHECK = None
ROOT = None


def run(*args, cwd=None):
    p = subprocess.run([WS1CHECK, *args], capture_output=True, text=True, cwd=cwd, timeout=600)
    return p.returncode, p.stdout, p.stderr


def src(*parts):
    return os.path.join(ROOT, *parts)


SMOKE = None


class CliBasics(unittest.TestCase):
    def test_help_and_version(self):
        rc, out, _ = run("--help")
        self.assertEqual(rc, 0)
        for sub in ("accuracy", "invariance", "parity", "audit", "gate", "fixtures", "env", "ops"):
            self.assertIn(sub, out)
        rc, out, _ = run("--version")
        self.assertEqual(rc, 0)
        self.assertRegex(out, r"ws1check \d+\.\d+\.\d+ \(source [0-9a-f]{40}|unknown")

    def test_usage_errors_exit_2(self):
        # A count past int64 (std::stoll's out_of_range once escaped CLI11's parse and aborted; found
        # by cli_fuzz) and one that would overflow the sum of the flag's values.
        for args in (["--no-such-flag"], ["ops", "--op", "no_such_op"], ["fixtures"], [], ["accuracy", "--bogus"],
                     ["--verbose=99999999999999999999999", "ops"], ["--verbose=9223372036854775807", "-v", "ops"]):
            rc, out, err = run(*args)
            self.assertEqual(rc, 2, args)
            self.assertTrue(err.startswith("ws1check: error: "), (args, err))

    def test_large_ulp_counts_come_with_their_context(self):
        # A green cell can be thousands of bf16 steps off where the values are tiny (attention's
        # outlier-channel dq); the table says how small those values are instead of an alarm.
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = run("accuracy", "--op", "attention", "--direction", "bwd", "--tier", "primary",
                               "--workload", SMOKE, "--out", d, cwd=ROOT)
            self.assertEqual(rc, 0, err)
            counts = [int(m.group(1)) for m in re.finditer(r"max ulp (\d+)", out)]
            self.assertTrue(any(n >= 1000 for n in counts), out)
            for m in re.finditer(r"max\|err\| ([0-9.e+-]+), p99.9 \S+, max ulp (\d+)( \(at \|ref\| below ~([0-9.e+-]+)\))?", out):
                n = int(m.group(2))
                self.assertEqual(m.group(3) is not None, n >= 16, m.group(0))
                if n >= 16:  # |ref| <~ 2^8 max|err| / N for a bf16 candidate
                    self.assertAlmostEqual(float(m.group(4)), 256 * float(m.group(1)) / n, delta=0.06 * float(m.group(4)))

    def test_ops_lists_13(self):
        rc, out, _ = run("ops")
        self.assertEqual(rc, 0)
        rows = [l for l in out.splitlines()[1:] if l.strip()]
        self.assertEqual(len(rows), 13)
        self.assertEqual(sum(1 for r in rows if r.split()[2] == "yes"), 12)


class Accuracy(unittest.TestCase):
    def test_accuracy_smoke_writes_evidence(self):
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = run("accuracy", "--op", "rms_norm", "--direction", "both",
                               "--workload", SMOKE, "--out", d, cwd=ROOT)
            self.assertEqual(rc, 0, err)
            self.assertIn("cpu_bf16", err)  # says which backend it fell back to
            self.assertRegex(out.splitlines()[-1], r"^green \d+, red 0, N/A 0 of \d+ cells; evidence: \S+$")
            # The same --out again replaces the artifact, and says so.
            rc, again, err = run("accuracy", "--op", "rms_norm", "--direction", "both",
                                 "--workload", SMOKE, "--out", d, cwd=ROOT)
            self.assertEqual(rc, 0, err)
            self.assertIn("(replacing the previous run's; --out DIR keeps runs apart)", again.splitlines()[-1])
            e = json.load(open(os.path.join(d, "accuracy-cpu_bf16.json")))
            self.assertEqual(e["summary"]["red"], 0)
            self.assertGreater(e["summary"]["green"], 0)
            self.assertEqual(e["verdict"], "green")
            for c in e["cells"]:
                self.assertEqual(c["backend"]["actual"], "cpu_bf16")
                self.assertRegex(c["fixture"]["hash"], r"^[0-9a-f]{32}$")
                self.assertEqual(c["dtypes"]["reference"], "float32")
                self.assertTrue(c["threshold"]["source"].startswith("judgments."))

    def test_accuracy_bad_options_exit_2_nothing_written(self):
        with tempfile.TemporaryDirectory() as d:
            for args in (["--op", "no_such_op"], ["--direction", "sideways"], ["--tier", "huge"],
                         ["--backend", "no_such_backend"]):
                rc, out, err = run("accuracy", *args, "--workload", SMOKE, "--out", d)
                self.assertEqual(rc, 2, args)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertEqual(os.listdir(d), [])

    def test_accuracy_gpu_backend_without_gpu_exit_3(self):
        rc, out, err = run("env", "--json")
        if json.loads(out)["environment"]["gpu"] is not None:
            self.skipTest("a GPU is present")
        rc, out, err = run("accuracy", "--op", "rms_norm", "--backend", "cuda_bf16", "--workload", SMOKE)
        self.assertEqual(rc, 3)
        self.assertEqual(len(err.strip().splitlines()), 1, err)


    def test_reference_engine_choice(self):
        # Unknown engine: bad input, one line, nothing written; the GPU engine without a GPU: exit 3.
        with tempfile.TemporaryDirectory() as d:
            for cmd in (["accuracy", "--op", "rms_norm"], ["gate", "--backends", "cpu_bf16", "--ops", "rms_norm"]):
                rc, out, err = run(*cmd, "--reference", "cpu_fp64", "--workload", SMOKE, "--out", d)
                self.assertEqual(rc, 2, cmd)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn("cpu_fp64", err)
            self.assertEqual(os.listdir(d), [])
        rc, out, err = run("env", "--json")
        if json.loads(out)["environment"]["gpu"] is not None:
            return
        for cmd in (["accuracy", "--op", "rms_norm"], ["gate", "--backends", "cpu_bf16", "--ops", "rms_norm"]):
            with tempfile.TemporaryDirectory() as d:
                rc, out, err = run(*cmd, "--reference", "cuda_fp32", "--workload", SMOKE, "--out", d)
                self.assertEqual(rc, 3, (cmd, err))
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertEqual(os.listdir(d), [])
        # The CPU engine, named: each accuracy cell records it.
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = run("accuracy", "--op", "rms_norm", "--reference", "cpu", "--workload", SMOKE, "--out", d)
            self.assertEqual(rc, 0, err)
            e = json.load(open(os.path.join(d, "accuracy-cpu_bf16.json")))
            for c in e["cells"]:
                self.assertTrue(c["reference"]["engine"].startswith("cpu_fp32"), c["reference"])


class Invariance(unittest.TestCase):
    def test_invariance_smoke_all_transforms(self):
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = run("invariance", "--op", "all", "--direction", "both",
                               "--backend", "cpu_bf16", "--workload", SMOKE, "--out", d, cwd=ROOT)
            self.assertEqual(rc, 0, err + out)
            e = json.load(open(os.path.join(d, "invariance-cpu_bf16.json")))
            self.assertEqual(e["summary"]["red"], 0)
            transforms = {c["transform"] for c in e["cells"]}
            self.assertEqual(transforms, {"BN/chunked", "B1/full", "B1/chunked", "BN/permuted",
                                          "BN/padded_right", "BN/padded_left", "layout", "tp2",
                                          "tp4", "tp8", "repeat"})
            for c in e["cells"]:
                self.assertIn(c["judgment"], ("forward_invariance", "gradient_invariance"))
                self.assertEqual(c["threshold"]["mode"], "bitwise")
                if c["verdict"] == "na":
                    self.assertTrue(c["reason"])
                if c["transform"] in ("tp2", "tp4", "tp8"):
                    self.assertEqual(c["op"], "det_gemm")
            ops = {c["op"] for c in e["cells"] if c["verdict"] == "green"}
            self.assertEqual(len(ops), 13)

    def test_invariance_one_transform_and_na(self):
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = run("invariance", "--op", "rms_norm", "--transform", "tp2",
                               "--workload", SMOKE, "--out", d, "--json")
            self.assertEqual(rc, 0, err)
            e = json.loads(out)
            # One cell per invariance family: upstream's pattern, then the inexact one.
            self.assertEqual([c["verdict"] for c in e["cells"]], ["na", "na"])
            self.assertEqual([c["fixture"]["id"] for c in e["cells"]],
                             ["rms_norm/invariance/pattern", "rms_norm/invariance/inexact"])
            self.assertTrue(e["cells"][1]["id"].endswith("/invariance/inexact/tp2"), e["cells"][1]["id"])
            self.assertIn("no K to split", e["cells"][0]["reason"])

    def test_ops_matrix_matches_the_run(self):
        # The matrix `ops --matrix` prints is the set of cells `invariance` produces.
        rc, out, err = run("ops", "--matrix", "--op", "attention", "--workload", SMOKE)
        self.assertEqual(rc, 0, err)
        rows = [l.split(None, 2) for l in out.splitlines()[1:] if l.strip()]
        inv = {r[0]: r[1] for r in rows if "invariance" in r[0]}
        self.assertEqual(inv["gradient_invariance/attention/BN/chunked"], "N/A")
        self.assertEqual(inv["forward_invariance/attention/BN/chunked"], "yes")
        self.assertNotIn("forward_invariance/attention/tp2", inv)
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = run("invariance", "--op", "attention", "--direction", "both",
                               "--workload", SMOKE, "--out", d, "--json")
            self.assertEqual(rc, 0, err)
            cells = {c["id"].split("/", 1)[1].replace("/invariance/", "/", 1): c["verdict"]
                     for c in json.loads(out)["cells"]}
        self.assertEqual(set(cells), set(inv))
        for k, v in inv.items():
            self.assertEqual(cells[k] == "na", v == "N/A", k)

    def test_invariance_bad_options_exit_2_nothing_written(self):
        with tempfile.TemporaryDirectory() as d:
            for args in (["--transform", "BN/sideways"], ["--op", "no_such_op"],
                         ["--direction", "up"], ["--workload", src("README.md")]):
                rc, out, err = run("invariance", *args, "--out", d)
                self.assertEqual(rc, 2, args)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertEqual(os.listdir(d), [])


class Env(unittest.TestCase):
    def test_env_json(self):
        rc, out, err = run("env", "--json", cwd=ROOT)
        self.assertEqual(rc, 0, err)
        j = json.loads(out)
        self.assertRegex(j["tool"]["source_commit"], r"^([0-9a-f]{40}|unknown)$")
        self.assertIn(j["tool"]["source_dirty"], (True, False, None))
        self.assertTrue(j["environment"]["build"]["compiler"])
        self.assertRegex(j["contract"]["sha256"], r"^[0-9a-f]{64}$")
        self.assertEqual(j["contract"]["version"], "ws1-c1-v2")
        if j["checkout"] is not None:  # run inside the checkout: its state is read at run time
            self.assertRegex(j["checkout"]["commit"], r"^[0-9a-f]{40}$")
            self.assertIsInstance(j["checkout"]["dirty"], bool)
        env = j["environment"]
        if env["gpu"] is None:
            self.assertEqual(env["backend"], "cpu_bf16")
            self.assertTrue(env["gpu_absent_reason"])

    def test_env_loads_upstream_contract(self):
        path = src("contracts", "upstream", "tolerance_contract.ws1-c1-v2.json")
        rc, out, err = run("env", "--contract", path)
        self.assertEqual(rc, 0, err)
        self.assertIn("version ws1-c1-v2", out)
        self.assertIn("1f6ab64a55b5211c62a9fe85dd8d8fb5b6c22c9958c85087adee4c5c814a03c5", out)
        self.assertIn("undeclared", out)


# One edit each of our contract; every one must be refused by `env --contract` with exit 2 and
# one stderr line naming the file and the json path.
def _set(path, value):
    def edit(doc):
        node = doc
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
    return edit


def _del(path):
    def edit(doc):
        node = doc
        for k in path[:-1]:
            node = node[k]
        del node[path[-1]]
    return edit


FA = ["judgments", "forward_accuracy", "by_op_class"]
FI = ["judgments", "forward_invariance", "by_op_class"]
DECL = ["ws1check_declarations"]
BAD_CONTRACTS = [
    ("negative atol", _set(FA + ["reduction", "bfloat16", "atol"], -0.05), "atol"),
    ("string rtol", _set(FA + ["reduction", "bfloat16", "rtol"], "0.02"), "rtol"),
    ("unknown mode", _set(FA + ["reduction", "bfloat16", "mode"], "fuzzy"), "mode"),
    ("unknown status", _set(FA + ["reduction", "bfloat16", "status"], "maybe"), "status"),
    ("bitwise with atol", _set(FI + ["reduction", "bfloat16", "atol"], 1e-3), "atol"),
    ("missing reduction row", _del(FA + ["reduction"]), "reduction"),
    ("missing bf16 row", _del(FA + ["logprob", "bfloat16"]), "bfloat16"),
    ("unknown op class", _set(FA + ["convolution"], {"float32": {"status": "applicable", "mode": "tolerance", "atol": 0.0, "rtol": 0.0}}), "convolution"),
    ("unknown dtype", _set(FA + ["reduction", "bfloat17"], {"status": "applicable", "mode": "tolerance", "atol": 0.0, "rtol": 0.0}), "bfloat17"),
    ("unknown judgment", _set(["judgments", "sideways_accuracy"], {}), "sideways_accuracy"),
    ("missing judgment", _del(["judgments", "gradient_accuracy"]), "gradient_accuracy"),
    ("clip not increasing", _set(["chain_logprob_aggregates", "default_clip_interval"], [1.2, 0.8]), "default_clip_interval"),
    ("clip one element", _set(["chain_logprob_aggregates", "default_clip_interval"], [0.8]), "default_clip_interval"),
    ("negative threshold", _set(["chain_logprob_aggregates", "metrics", "max_abs_dlogp", "by_execution_dtype", "bfloat16", "threshold"], -1), "threshold"),
    ("unknown version", _set(["version"], "ws1-c9-v1"), "version"),
    ("k_shards zero", _set(DECL + ["det_gemm_k_split", "shards"], 0), "shards"),
    ("k_shards float", _set(DECL + ["det_gemm_k_split", "shards"], 2.5), "shards"),
    ("unknown rms order", _set(DECL + ["rms_norm_rounding", "order"], "sideways"), "order"),
    ("unknown nan policy", _set(DECL + ["invariance", "nan_policy"], "ignore"), "nan_policy"),
    ("policy reference dtype", _set(["policy", "reference_dtype"], "bfloat16"), "reference_dtype"),
    ("policy accumulation dtype", _set(["policy", "accumulation_dtype"], "bfloat16"), "accumulation_dtype"),
    ("bf16 logprob output", _set(["policy", "output_dtype", "logprob_aggregates"], "bfloat16"), "logprob_aggregates"),
    ("extra key in row", _set(FA + ["reduction", "bfloat16", "slack"], 1), "slack"),
    ("relaxation allowed", _set(["policy", "backend_private_tolerance_relaxation"], True), "backend_private_tolerance_relaxation"),
]


class BadContracts(unittest.TestCase):
    def test_each_bad_contract_exit_2_one_line(self):
        good = json.load(open(src("contracts", "ws1-c1-v2.json")))
        with tempfile.TemporaryDirectory() as d:
            for name, edit, field in BAD_CONTRACTS:
                with self.subTest(name):
                    doc = json.loads(json.dumps(good))
                    edit(doc)
                    path = os.path.join(d, name.replace(" ", "_") + ".json")
                    with open(path, "w") as f:
                        json.dump(doc, f)
                    rc, out, err = run("env", "--contract", path)
                    self.assertEqual(rc, 2, f"{name}: {err}")
                    self.assertEqual(out, "", name)
                    lines = err.strip().splitlines()
                    self.assertEqual(len(lines), 1, err)
                    self.assertIn(path, lines[0])
                    self.assertIn(field, lines[0])

    def test_static_bad_files(self):
        bad_dir = src("test", "data", "contracts", "bad")
        files = sorted(os.listdir(bad_dir))
        self.assertGreater(len(files), 0)
        for fn in files:
            with self.subTest(fn):
                path = os.path.join(bad_dir, fn)
                rc, out, err = run("env", "--contract", path)
                self.assertEqual(rc, 2, err)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertIn(path, err)


class Fixtures(unittest.TestCase):
    def test_list_has_ids_first(self):
        rc, out, err = run("fixtures", "list", "--workload", SMOKE)
        self.assertEqual(rc, 0, err)
        ids = [l.split()[0] for l in out.splitlines()]
        self.assertIn("rms_norm/primary/normal", ids)
        self.assertEqual(len(ids), len(set(ids)))

    def test_verify_smoke(self):
        rc, out, err = run("fixtures", "verify", "--workload", SMOKE)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out.splitlines()[-1], r"^\d+ fixture\(s\) match ")

    def test_export_import_and_flipped_byte(self):
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "x.safetensors")
            rc, out, err = run("fixtures", "export", "rms_norm/primary/normal", "--workload", SMOKE, "--to", f)
            self.assertEqual(rc, 0, err)
            rc, out, err = run("fixtures", "import", f, "--workload", SMOKE)
            self.assertEqual(rc, 0, err)
            data = bytearray(open(f, "rb").read())
            data[-3] ^= 0x01  # one bit of the last tensor's data
            g = os.path.join(d, "flipped.safetensors")
            open(g, "wb").write(data)
            rc, out, err = run("fixtures", "import", g, "--workload", SMOKE)
            self.assertEqual(rc, 2)
            self.assertEqual(out, "")
            lines = err.strip().splitlines()
            self.assertEqual(len(lines), 1, err)
            self.assertIn(g, lines[0])
            self.assertIn("rms_norm/primary/normal", lines[0])
            # A header byte flipped: the safetensors validator refuses it, one line, exit 2.
            data = bytearray(open(f, "rb").read())
            data[8] = ord("[")
            open(g, "wb").write(data)
            rc, out, err = run("fixtures", "import", g, "--workload", SMOKE)
            self.assertEqual(rc, 2)
            self.assertEqual(len(err.strip().splitlines()), 1, err)

    def test_export_to_unwritable_place_leaves_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            target = os.path.join(d, "missing-dir", "x.safetensors")
            rc, out, err = run("fixtures", "export", "rms_norm/short/normal", "--workload", SMOKE, "--to", target)
            self.assertEqual(rc, 2)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertEqual(os.listdir(d), [])

    def test_unknown_fixture_and_bad_workload(self):
        rc, out, err = run("fixtures", "show", "no/such/fixture", "--workload", SMOKE)
        self.assertEqual(rc, 2)
        self.assertIn("no/such/fixture", err)
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "w.json")
            doc = json.load(open(SMOKE))
            doc["seed"] = doc["seed"] + 1  # identity hash no longer recomputes
            json.dump(doc, open(bad, "w"), indent=2)
            rc, out, err = run("fixtures", "list", "--workload", bad)
            self.assertEqual(rc, 2)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn(bad, err)
            self.assertIn("fixture_identity_sha256", err)

    def test_lock_mismatch_refused(self):
        with tempfile.TemporaryDirectory() as d:
            w = os.path.join(d, "ws1-smoke.json")
            open(w, "w").write(open(SMOKE).read())
            lock = json.load(open(SMOKE.replace(".json", ".lock.json")))
            key = "rms_norm/primary/normal"
            lock["fixtures"][key] = "0" * 32
            json.dump(lock, open(os.path.join(d, "ws1-smoke.lock.json"), "w"), indent=2)
            rc, out, err = run("fixtures", "verify", "--workload", w)
            self.assertEqual(rc, 2)
            self.assertIn(key, err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)


class BenchPeers(unittest.TestCase):
    # --peers is read before anything runs, so a bad file is exit 2 on any build and machine.
    def peers(self, **edit):
        j = {"schema": "ws1-peers-v1", "environment": {"gpu": "NVIDIA H200", "torch": "2.9.0"},
             "rows": [{"op": "attention", "variant": "causal S=8192", "direction": "fwd", "peer": "cudnn_sdpa",
                       "median_ms": 4.0, "tflops": 300.0}]}
        for k, v in edit.items():
            if k == "row":
                j["rows"][0].update(v)
            else:
                j[k] = v
        return json.dumps(j)

    def test_bad_peers_file_exit_2_one_line_nothing_written(self):
        with tempfile.TemporaryDirectory() as d:
            out_dir = os.path.join(d, "out")
            cases = [("absent.json", None, "cannot open"), ("text.json", "not json", "$: not valid JSON"),
                     ("schema.json", self.peers(schema="ws1-gemm-peers-v1"), "schema: expected"),
                     ("median.json", self.peers(row={"median_ms": 0}), "rows[0].median_ms: must be positive"),
                     ("peer.json", self.peers(row={"peer": ""}), "rows[0].peer: must be a non-empty string")]
            for name, text, where in cases:
                path = os.path.join(d, name)
                if text is not None:
                    with open(path, "w") as f:
                        f.write(text)
                rc, out, err = run("bench", "--op", "attention", "--peers", path, "--out", out_dir)
                self.assertEqual(rc, 2, (name, err))
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertTrue(err.startswith(f"ws1check: error: {path}: {where}"), (name, err))
            self.assertFalse(os.path.exists(out_dir))

    def test_good_peers_file_passes_to_the_device_check(self):
        rc, out, err = run("env", "--json")
        if json.loads(out)["environment"]["gpu"] is not None:
            self.skipTest("a GPU is present")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "peers.json")
            with open(path, "w") as f:
                f.write(self.peers())
            rc, out, err = run("bench", "--op", "attention", "--peers", path, "--out", os.path.join(d, "out"))
            self.assertEqual(rc, 3, err)
            self.assertRegex(err, r"needs a (CUDA device|build with CUDA)")
            self.assertEqual(sorted(os.listdir(d)), ["peers.json"])


class ContractDiff(unittest.TestCase):
    # `env --contract FILE` lists FILE's differences from the shipped contract in force, leaf by
    # leaf; the edited value is derived from the file (no tolerance literal here).
    KL = ["chain_logprob_aggregates", "metrics", "approx_kl0", "by_execution_dtype", "bfloat16", "threshold"]

    def test_env_contract_lists_differences_from_the_default(self):
        default = src("contracts", "ws1-c1-v2.json")
        with open(default) as f:
            good = json.load(f)
        was = good
        for k in self.KL:
            was = was[k]
        doc = json.loads(json.dumps(good))
        _set(self.KL, was / 2)(doc)
        doc["review_notes"] = {"reviewer": "someone"}  # the top level is open to new blocks
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "edited.json")
            with open(path, "w") as f:
                json.dump(doc, f, indent=2)
            rc, out, err = run("env", "--contract", path, cwd=ROOT)
            self.assertEqual(rc, 0, err)
            lines = out.splitlines()
            head = [i for i, l in enumerate(lines) if l.startswith("differences from ")]
            self.assertEqual(len(head), 1, out)
            self.assertRegex(lines[head[0]], r"^differences from \S*ws1-c1-v2\.json \(ws1-c1-v2\): 2 rows$")
            self.assertEqual(lines[head[0] + 1:], [
                f"  {'.'.join(self.KL)}: {json.dumps(was)} -> {json.dumps(was / 2)}",
                '  review_notes.reviewer: (absent) -> "someone"'])

            rc, out, err = run("env", "--json", "--contract", path, cwd=ROOT)
            self.assertEqual(rc, 0, err)
            j = json.loads(out)
            self.assertEqual(j["contract"]["path"], path)  # the existing keys are unchanged
            cd = j["contract_diff"]
            self.assertEqual(cd["base"]["version"], "ws1-c1-v2")
            self.assertTrue(os.path.samefile(cd["base"]["path"], default))
            self.assertRegex(cd["base"]["sha256"], r"^[0-9a-f]{64}$")
            self.assertEqual(cd["rows"], [
                {"path": ".".join(self.KL), "base": json.dumps(was), "other": json.dumps(was / 2)},
                {"path": "review_notes.reviewer", "base": None, "other": '"someone"'}])

            # A byte copy of the default: identical, and no contract_diff in the JSON.
            copy = os.path.join(d, "copy.json")
            with open(default, "rb") as f, open(copy, "wb") as g:
                g.write(f.read())
            rc, out, err = run("env", "--contract", copy, cwd=ROOT)
            self.assertEqual(rc, 0, err)
            self.assertEqual(out.splitlines()[-1], "identical to the contract in force")
            rc, out, err = run("env", "--json", "--contract", copy, cwd=ROOT)
            self.assertEqual(rc, 0, err)
            self.assertNotIn("contract_diff", json.loads(out))

    def test_default_contract_prints_no_differences(self):
        for args in ([], ["--contract", src("contracts", "ws1-c1-v2.json")]):
            rc, out, err = run("env", *args, cwd=ROOT)
            self.assertEqual(rc, 0, err)
            self.assertNotIn("differences from", out, args)
            self.assertNotIn("identical to the contract in force", out, args)
            rc, out, err = run("env", "--json", *args, cwd=ROOT)
            self.assertEqual(rc, 0, err)
            self.assertNotIn("contract_diff", json.loads(out), args)


if __name__ == "__main__":
    WS1CHECK = os.path.abspath(sys.argv.pop(1))
    ROOT = os.path.abspath(sys.argv.pop(1))
    SMOKE = os.path.join(ROOT, "fixtures", "ws1-smoke.json")
    unittest.main(verbosity=2)
