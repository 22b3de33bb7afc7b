#!/usr/bin/env python3
"""`ws1check parity` end to end on cpu_bf16 with synthetic:tiny: the manifest protocol exits 0
and writes the evidence and the per-token safetensors; --strict; --json; a small sweep; bad input
(exit 2, nothing written), including a Hugging Face snapshot that is not the manifest's model;
--logprobs on logprobs measured elsewhere (JSONL, safetensors, an .npy pair): green, red, bad files.

Usage: parity_test.py WS1CHECK SOURCE_ROOT   (stdlib; the snapshot case runs the numpy script)
"""
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

WS1CHECK = None
ROOT = None


def run(*args):
    p = subprocess.run([WS1CHECK, *args], capture_output=True, text=True, cwd=ROOT, timeout=600)
    return p.returncode, p.stdout, p.stderr


def load_json(path):
    with open(path) as f:
        return json.load(f)


def safetensors_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


class Parity(unittest.TestCase):
    def test_manifest_protocol_tiny_cpu_bf16(self):
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = run("parity", "--model", "synthetic:tiny", "--backend", "cpu_bf16", "--out", d)
            self.assertEqual(rc, 0, err)
            self.assertIn("synthetic weights: not the WS1 chain gate", out)
            self.assertIn("manifest: 4 sequences, 27 active tokens", out)
            self.assertRegex(out.splitlines()[-1], r"^green 1, red 0, N/A 0 of 1 cells; evidence: ")
            e = load_json(os.path.join(d, "parity-cpu_bf16.json"))
            self.assertEqual(e["verdict"], "green")
            self.assertEqual(len(e["cells"]), 1)
            c = e["cells"][0]
            self.assertEqual(c["judgment"], "chain_parity")
            self.assertEqual(c["id"], "chain/chain_parity/manifest/synthetic:tiny/cpu_bf16")
            self.assertEqual(c["backend"], {"expected": "cpu_bf16", "actual": "cpu_bf16"})
            self.assertRegex(c["fixture"]["hash"], r"^[0-9a-f]{32}$")
            self.assertRegex(c["fixture"]["id"], r"^chain/manifest/synthetic:tiny#xxh3-128:[0-9a-f]{32}$")
            self.assertEqual(c["threshold"]["mode"], "metric")
            m = {x["name"]: x for x in c["metrics"]}
            for name in ("max_abs_dlogp", "approx_kl0", "clipfrac0"):
                self.assertTrue(m[name]["source"].startswith("chain_logprob_aggregates.metrics." + name))
                self.assertTrue(m[name]["passed"])
            contract = load_json(os.path.join(ROOT, "contracts", "ws1-c1-v2.json"))
            for name in ("max_abs_dlogp", "approx_kl0", "clipfrac0"):
                row = contract["chain_logprob_aggregates"]["metrics"][name]["by_execution_dtype"]["bfloat16"]
                self.assertEqual(m[name]["threshold"], row["threshold"])
            self.assertEqual(m["active_tokens"]["value"], 27)
            self.assertIsNone(m["mean_abs_dlogp"]["threshold"])
            h = safetensors_header(os.path.join(d, "parity-cpu_bf16.tokens.safetensors"))
            for name in ("dlogp", "teacher_forcing_logp", "rollout_decode_logp", "reference_logp"):
                self.assertEqual(h[name]["shape"], [27])
                self.assertEqual(h[name]["dtype"], "F32")
            meta = h["__metadata__"]
            self.assertEqual(meta["ws1.weights_synthetic"], "true")
            self.assertEqual(meta["ws1.fixture_hash"], c["fixture"]["hash"])
            self.assertIn("training_style_teacher_forcing - inference_style_rollout_decode", meta["ws1.dlogp"])

    def test_strict_and_json(self):
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = run("parity", "--model", "synthetic:tiny", "--backend", "cpu_bf16", "--strict",
                               "--out", d)
            self.assertEqual(rc, 0, err)
            self.assertIn("strict: d exactly 0 at 27 of 27 active tokens; no hidden state differs", out)
            rc, out, err = run("parity", "--model", "synthetic:tiny", "--backend", "cpu_bf16", "--strict",
                               "--json", "--out", d)
            self.assertEqual(rc, 0, err)
            e = json.loads(out)
            self.assertTrue(e["cells"][0]["tensors"][0]["equal_bits"])

    def test_batched_decode(self):
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = run("parity", "--model", "synthetic:tiny", "--backend", "cpu_bf16", "--strict",
                               "--batched-decode", "--out", d)
            self.assertEqual(rc, 0, err)
            self.assertIn("rhs batched rollout decode", out)
            c = load_json(os.path.join(d, "parity-cpu_bf16.json"))["cells"][0]
            self.assertEqual(c["id"], "chain/chain_parity/manifest/batched_decode/synthetic:tiny/cpu_bf16")
            self.assertEqual(c["transform"], "teacher_forcing_vs_batched_rollout_decode")

    def test_rollout_in_another_rms_norm_order(self):
        """rhs in hf order, lhs in kernel order: two paths that are not bit-identical, so d != 0 at
        some tokens and --strict names the first drift; the cell id says which orders ran."""
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = run("parity", "--model", "synthetic:tiny", "--backend", "cpu_bf16", "--strict",
                               "--rms-norm-order", "kernel", "--rollout-rms-norm-order", "hf", "--out", d)
            self.assertEqual(rc, 1, err)  # --strict: d != 0 is red
            self.assertIn("rms_norm order: lhs kernel, rhs hf", out)
            self.assertRegex(out, r"strict: d exactly 0 at \d+ of 27 active tokens; first drift ")
            c = load_json(os.path.join(d, "parity-cpu_bf16.json"))["cells"][0]
            self.assertEqual(c["id"], "chain/chain_parity/manifest/synthetic:tiny/cpu_bf16/rms_norm_order=kernel/"
                                      "rollout_rms_norm_order=hf")
            m = {x["name"]: x["value"] for x in c["metrics"]}
            self.assertGreater(m["max_abs_dlogp"], 0)
            rc, out, err = run("parity", "--model", "synthetic:tiny", "--backend", "cpu_bf16", "--strict",
                               "--rms-norm-order", "hf", "--rollout-rms-norm-order", "hf", "--out", d)
            self.assertEqual(rc, 0, err)  # the same order on both sides: d == 0 again
            self.assertIn("strict: d exactly 0 at 27 of 27 active tokens", out)

    def test_small_sweep(self):
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = run("parity", "--model", "synthetic:tiny", "--backend", "cpu_bf16", "--fixture",
                               "sweep", "--seeds", "1,2", "--prompt-len", "4", "--response-len", "6",
                               "--logit-scales", "1,4", "--sequences", "2", "--out", d)
            self.assertEqual(rc, 0, err)
            c = load_json(os.path.join(d, "parity-cpu_bf16.json"))["cells"][0]
            self.assertEqual(c["tier"], "sweep")
            m = {x["name"]: x for x in c["metrics"]}
            self.assertEqual(m["active_tokens"]["value"], 2 * 2 * 2 * 6)
            self.assertEqual(len(c["fixture"]["tensors"]), 2 * 2 * 2 * 2)

    def test_kv_fixture_tiny(self):
        """C6/C7 decode vs prefill at tiny's head shape: 6 cases x 2 cells, all green, bitwise."""
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = run("parity", "--fixture", "kv", "--model", "synthetic:tiny", "--backend", "cpu_bf16",
                               "--strict", "--out", d)
            self.assertEqual(rc, 0, err)
            self.assertIn("heads 4/2, head_dim 16 from synthetic:tiny; probe head [64, 64]", out)
            self.assertRegex(out.splitlines()[-1], r"^green 12, red 0, N/A 0 of 12 cells; evidence: ")
            e = load_json(os.path.join(d, "parity-cpu_bf16.json"))
            self.assertEqual(e["verdict"], "green")
            cases = ["decode-b1-short", "decode-b1-long", "decode-b1-primary-s3", "decode-bn-varlen",
                     "decode-bn-padded-right", "decode-bn-padded-left"]
            self.assertEqual([c["id"] for c in e["cells"]],
                             [f"chain/kv_consistency/{k}/{part}/hq4_hkv2_d16/cpu_bf16"
                              for k in cases for part in ("decode_vs_prefill", "logprob_probe")])
            row = load_json(os.path.join(ROOT, "contracts", "ws1-c1-v2.json"))["judgments"]["forward_accuracy"][
                "by_op_class"]["attention"]["bfloat16"]
            for rows, probe in zip(e["cells"][0::2], e["cells"][1::2]):
                self.assertEqual(rows["judgment"], "forward_accuracy")
                self.assertEqual(rows["threshold"]["source"], "judgments.forward_accuracy.by_op_class.attention.bfloat16")
                self.assertEqual((rows["threshold"]["atol"], rows["threshold"]["rtol"]), (row["atol"], row["rtol"]))
                bitwise = [t for t in rows["tensors"] if "equal_bits" in t]
                self.assertEqual(len(bitwise), 3)  # k and v read back, and --strict's rows
                self.assertTrue(all(t["equal_bits"] for t in bitwise))
                m = {x["name"]: x["value"] for x in rows["metrics"]}
                self.assertEqual(m["bitwise_differing_elements"], 0)
                self.assertEqual(probe["judgment"], "chain_parity")
                self.assertEqual(probe["fixture"], rows["fixture"])
                m = {x["name"]: x["value"] for x in probe["metrics"]}
                self.assertEqual(m["max_abs_dlogp"], 0)

    def test_bad_input_exits_2_and_writes_nothing(self):
        cases = [
            (["--backend", "cpu_bf16"], "--model"),
            (["--model", "synthetic:huge", "--backend", "cpu_bf16"], "unknown synthetic config"),
            (["--model", "synthetic:tiny", "--seeds", "1"], "--seeds applies to --fixture sweep only"),
            (["--model", "synthetic:tiny", "--fixture", "other"], "expected manifest, sweep or kv"),
            (["--fixture", "kv", "--batched-decode"], "--batched-decode applies to the chain"),
            (["--model", "synthetic:tiny", "--rollout-rms-norm-order", "fast"], "expected kernel or hf"),
            (["--fixture", "kv", "--rollout-rms-norm-order", "hf"], "--rms-norm-order applies to the chain"),
            (["--model", "/nonexistent/snapshot"], "/nonexistent/snapshot/config.json"),
            (["--model", "synthetic:tiny", "--fixture", "sweep", "--logit-scales", "3"], "power of two"),
        ]
        for args, message in cases:
            with tempfile.TemporaryDirectory() as d:
                rc, out, err = run("parity", *args, "--out", d)
                self.assertEqual(rc, 2, (args, err))
                self.assertIn(message, err)
                self.assertEqual(os.listdir(d), [], args)

    def test_logprobs_measured_elsewhere(self):
        contract = load_json(os.path.join(ROOT, "contracts", "ws1-c1-v2.json"))
        limit = contract["chain_logprob_aggregates"]["metrics"]["max_abs_dlogp"]["by_execution_dtype"]["bfloat16"]["threshold"]
        lhs = [-0.5 - i / 64 for i in range(40)]
        faithful = [x + (1 / 4096 if i % 2 else 0.0) for i, x in enumerate(lhs)]  # exact in float32
        planted = list(faithful)
        planted[7] = lhs[7] - 2 * limit
        with tempfile.TemporaryDirectory() as d:
            def jsonl(name, rhs):
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    for i, (a, b) in enumerate(zip(lhs, rhs)):
                        f.write(json.dumps({"lhs": a, "rhs": b, "sequence": i // 10, "position": 8 + i % 10}) + "\n")
                return path

            def npy(name, values):
                path = os.path.join(d, name)
                header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % len(values)
                header += " " * (63 - (10 + len(header)) % 64) + "\n"
                with open(path, "wb") as f:
                    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
                    f.write(struct.pack("<%df" % len(values), *values))
                return path

            out = os.path.join(d, "out")
            rc, stdout, err = run("parity", "--logprobs", jsonl("good.jsonl", faithful), "--out", out)
            self.assertEqual(rc, 0, err)
            self.assertIn("40 tokens with sequence ids", stdout)
            self.assertIn("verl's k3 estimator", stdout)
            e = load_json(os.path.join(out, "parity-logprobs.json"))
            self.assertEqual(e["verdict"], "green")
            c = e["cells"][0]
            self.assertEqual(c["judgment"], "chain_parity")
            self.assertEqual(c["backend"], {"expected": "logprobs_file", "actual": "logprobs_file"})
            m = {x["name"]: x for x in c["metrics"]}
            self.assertEqual(m["max_abs_dlogp"]["value"], 1 / 4096)
            self.assertEqual(m["max_abs_dlogp"]["threshold"], limit)
            self.assertEqual(m["abs_dlogp_tokens0"]["value"], 20)
            self.assertEqual(m["abs_dlogp_tokens(1e-04,1e-03]"]["value"], 20)

            rc, stdout, err = run("parity", "--logprobs", jsonl("bad.jsonl", planted), "--out", out)
            self.assertEqual(rc, 1, err)
            e = load_json(os.path.join(out, "parity-logprobs.json"))
            self.assertEqual(e["verdict"], "red")
            self.assertIn("max_abs_dlogp", e["cells"][0]["reason"])

            pair = npy("l.npy", lhs) + "," + npy("r.npy", faithful)
            rc, stdout, err = run("parity", "--logprobs", pair, "--strict", "--out", out)
            self.assertEqual(rc, 1, err)
            self.assertIn("strict: d is not exactly 0 at 20 of 40 tokens",
                          load_json(os.path.join(out, "parity-logprobs.json"))["cells"][0]["reason"])

        cases = [
            (["--logprobs", "x.csv"], "expected FILE.safetensors, FILE.jsonl or LHS.npy,RHS.npy"),
            (["--logprobs", "/nonexistent/a.jsonl"], "/nonexistent/a.jsonl"),
            (["--logprobs", "a.jsonl", "--model", "synthetic:tiny"], "--model runs a chain"),
            (["--logprobs", "a.jsonl", "--backend", "cpu_bf16"], "--backend runs a chain"),
        ]
        for args, message in cases:
            with tempfile.TemporaryDirectory() as d:
                rc, out, err = run("parity", *args, "--out", d)
                self.assertEqual(rc, 2, (args, err))
                self.assertIn(message, err)
                self.assertEqual(os.listdir(d), [], args)

    def test_unpinned_snapshot_of_another_layout_runs_labelled(self):
        # A policy of its own layout (3 layers, 1 kv head): refused as the manifest's model,
        # judged with --unpinned, its shard hashes and config in the evidence and the run labelled.
        script = os.path.join(ROOT, "test", "model", "write_tiny_checkpoint.py")
        smoke = os.path.join(ROOT, "fixtures", "ws1-smoke.json")
        note = "weights not pinned by the manifest: not the WS1 chain gate"
        with tempfile.TemporaryDirectory() as d:
            snap = os.path.join(d, "snap")
            subprocess.run([sys.executable, script, snap, "--layers", "3", "--kv-heads", "1"], check=True)
            base = ("parity", "--model", snap, "--backend", "cpu_bf16", "--workload", smoke)
            rc, _, err = run(*base, "--out", os.path.join(d, "pinned"))
            self.assertEqual(rc, 2, err)
            self.assertIn("is not the manifest's model", err)
            self.assertFalse(os.path.exists(os.path.join(d, "pinned")))

            out = os.path.join(d, "o")
            rc, stdout, err = run(*base, "--unpinned", "--out", out)
            self.assertEqual(rc, 0, err)
            self.assertIn("hf-unpinned:" + snap, stdout)
            self.assertIn(note, stdout)
            cell = load_json(os.path.join(out, "parity-cpu_bf16.json"))["cells"][0]
            self.assertEqual(cell["verdict"], "green")
            self.assertEqual(cell["id"], "chain/chain_parity/manifest/hf-unpinned:" + snap + "/cpu_bf16")
            reason = cell["reason"]
            self.assertTrue(reason.startswith(note), reason)
            self.assertIn("config: 3 layers, hidden 64, intermediate 128, 4 q / 1 kv heads of 16, vocab 256", reason)
            records = ""
            for shard in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
                with open(os.path.join(snap, shard), "rb") as f:
                    data = f.read()
                sha = hashlib.sha256(data).hexdigest()
                self.assertIn(f"{shard} sha256 {sha} ({len(data)} bytes)", reason)
                records += f"{shard}\t{sha}\t{len(data)}\n"
            content = hashlib.sha256(records.encode()).hexdigest()
            self.assertEqual(cell["fixture"]["id"],
                             f"chain/manifest/hf-unpinned:{snap}#sha256-of-sorted-shard-records-v1:{content}")
            meta = safetensors_header(os.path.join(out, "parity-cpu_bf16.tokens.safetensors"))["__metadata__"]
            self.assertEqual(meta["ws1.weights_pinned"], "false")
            self.assertIn("model-00002-of-00002.safetensors sha256", meta["ws1.weights_snapshot"])

        for model in ("synthetic:tiny", ""):
            with tempfile.TemporaryDirectory() as d:
                args = ("--model", model) if model else ()
                rc, _, err = run("parity", *args, "--unpinned", "--backend", "cpu_bf16", "--out", d)
                self.assertEqual(rc, 2, err)
                self.assertIn("--unpinned", err)
                self.assertEqual(os.listdir(d), [])

    def test_snapshot_that_is_not_the_manifest_model_is_refused(self):
        script = os.path.join(ROOT, "test", "model", "write_tiny_checkpoint.py")
        with tempfile.TemporaryDirectory() as d:
            snap = os.path.join(d, "snap")
            subprocess.run([sys.executable, script, snap], check=True)
            rc, out, err = run("parity", "--model", snap, "--backend", "cpu_bf16", "--out", os.path.join(d, "o"))
            self.assertEqual(rc, 2, err)
            self.assertIn(snap + "/config.json", err)
            self.assertIn("is not the manifest's model (Qwen/Qwen3-8B): num_hidden_layers: 2 against 36", err)
            self.assertFalse(os.path.exists(os.path.join(d, "o")))


if __name__ == "__main__":
    WS1CHECK = os.path.abspath(sys.argv[1])
    ROOT = sys.argv[2]
    unittest.main(argv=sys.argv[:1], verbosity=2)
