#!/usr/bin/env python3
"""`ws1check gate` end to end on the smoke workload: exit codes, the four outputs (evidence,
C8 matrix, JUnit XML, HTML), their counts against the evidence, the C8 rows against upstream's
H20 file, the HTML rendered in headless Chromium, the progress line, and a planted red run.

Usage: gate_test.py WS1CHECK SOURCE_ROOT   (stdlib only)
"""
import errno
import html.parser
import json
import os
import pty
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

WS1CHECK = None
ROOT = None
SMOKE = None
H20 = None
OUTPUTS = ("gate.json", "c8-execute.json", "junit.xml", "report.html")


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def write_text(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)




def run(*args, cwd=None):
    p = subprocess.run([WS1CHECK, *args], capture_output=True, text=True, cwd=cwd, timeout=600)
    return p.returncode, p.stdout, p.stderr


def verdicts(evidence):
    return {c["id"]: (c["op"], c["verdict"], c.get("reason", "")) for c in evidence["cells"]}


def check_junit(test, path, evidence):
    """The JUnit file against the evidence: one testcase per cell, counts per suite and overall."""
    root = ET.parse(path).getroot()
    test.assertEqual(root.tag, "testsuites")
    cells = verdicts(evidence)
    seen = {}
    totals = {"tests": 0, "failures": 0, "skipped": 0, "errors": 0}
    for suite in root.findall("testsuite"):
        cases = suite.findall("testcase")
        counts = {
            "tests": len(cases),
            "failures": sum(1 for c in cases if c.find("failure") is not None),
            "skipped": sum(1 for c in cases if c.find("skipped") is not None),
            "errors": sum(1 for c in cases if c.find("error") is not None),
        }
        for k, v in counts.items():
            test.assertEqual(int(suite.get(k)), v, (suite.get("name"), k))
            totals[k] += v
        for attr in ("name", "timestamp", "hostname", "time"):
            test.assertTrue(suite.get(attr), attr)
        if suite.get("name").endswith(".stages"):
            continue
        for c in cases:
            name = c.get("name")
            test.assertNotIn(name, seen)
            seen[name] = c
            op, verdict, reason = cells[name]
            test.assertEqual(c.get("classname"), op)
            failure, skipped = c.find("failure"), c.find("skipped")
            if verdict == "red":
                test.assertIsNotNone(failure, name)
                test.assertTrue(failure.get("message"))
            elif verdict in ("na", "vacuous"):  # vacuous: not a pass (docs/decisions.md D29)
                test.assertEqual(skipped.get("message"), reason)
            else:
                test.assertIsNone(failure)
                test.assertIsNone(skipped)
    for k, v in totals.items():
        test.assertEqual(int(root.get(k)), v, k)
    test.assertEqual(set(seen), set(cells))
    s = evidence["summary"]
    cell_suites = [x for x in root.findall("testsuite") if not x.get("name").endswith(".stages")]
    test.assertEqual(sum(int(x.get("tests")) for x in cell_suites), s["total"])
    test.assertEqual(sum(int(x.get("failures")) for x in cell_suites), s["red"])
    test.assertEqual(sum(int(x.get("skipped")) for x in cell_suites), s["na"] + s["vacuous"])
    return root


class MatrixDom(html.parser.HTMLParser):
    """Squares of the matrix section by verdict, heat-map rows, and the script's marks."""

    def __init__(self):
        super().__init__()
        self.squares = {"green": 0, "red": 0, "na": 0, "vacuous": 0}
        self.rows = 0
        self.rendered = None
        self.ready = None
        self._section = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.ready = a.get("data-ws1-ready")
        if tag == "section":
            self._section.append(a.get("id"))
        in_matrix = "matrix" in self._section
        if in_matrix and tag == "a" and "sq" in (a.get("class") or "").split():
            self.squares[a["data-v"]] += 1
        if in_matrix and tag == "tr" and self._in_tbody:
            self.rows += 1
        if tag == "tbody":
            self._in_tbody = True
        if a.get("id") == "rendered-counts":
            self.rendered = a

    _in_tbody = False

    def handle_endtag(self, tag):
        if tag == "section" and self._section:
            self._section.pop()
        if tag == "tbody":
            self._in_tbody = False


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class GateSmoke(unittest.TestCase):
    """One gate run on the smoke workload, shared by the tests of this class."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = os.path.join(cls.tmp.name, "gate-out")
        cls.rc, cls.stdout, cls.stderr = run("gate", "--backends", "cpu_bf16", "--workload", SMOKE,
                                             "--out", cls.out, "--compare-c8", H20, "-q", cwd=ROOT)
        cls.evidence = load_json(os.path.join(cls.out, "gate.json"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_exit_code_follows_the_outputs(self):
        """Exit 1 exactly when a cell or a C8 row is red or the audit failed; else 0."""
        self.assertIn(self.rc, (0, 1), self.stdout + self.stderr)
        self.assertEqual(sorted(os.listdir(self.out)), sorted(OUTPUTS))
        self.assertEqual(self.stderr, "")  # -q, and nothing went wrong
        self.assertRegex(self.stdout, r"(?m)^parity: passed \(manifest protocol \(27 active tokens\), synthetic:tiny "
                                      r"\(synthetic weights: not the WS1 chain gate\): 1 of 1 backends green\)")
        self.assertRegex(self.stdout, r"(?m)^audit: (passed|failed) \(\d+ rows: ")
        c8 = load_json(os.path.join(self.out, "c8-execute.json"))
        red = (self.evidence["summary"]["red"] > 0
               or any(c["status"] == "red" for c in c8["cells"])
               or re.search(r"(?m)^audit: failed", self.stdout) is not None)
        self.assertEqual(self.rc, 1 if red else 0)
        self.assertRegex(self.stdout, r"(?m)^gate %s: green \d+, red %d, N/A \d+, vacuous \d+ of %d cells"
                         % ("red" if red else "green", self.evidence["summary"]["red"],
                            self.evidence["summary"]["total"]))

    def test_no_cell_is_red(self):
        """With det_gemm on Option A (docs/decisions.md D11) the smoke gate on cpu_bf16 has no
        red cell, the audit of this build passes and the gate exits 0."""
        red = [c["id"] for c in self.evidence["cells"] if c["verdict"] == "red"]
        self.assertEqual(red, [])
        self.assertEqual(self.rc, 0, self.stdout)
        self.assertRegex(self.stdout, r"(?m)^audit: passed")

    def test_evidence_holds_every_judgment(self):
        e = self.evidence
        judged = {(c["op"], c["judgment"]) for c in e["cells"]}
        ops = {c["op"] for c in e["cells"]} - {"qwen3_dense_chain"}
        self.assertEqual(len(ops), 13)
        # The parity stage's cell: the manifest protocol on the tiny synthetic chain, d == 0.
        chain = [c for c in e["cells"] if c["judgment"] == "chain_parity"]
        self.assertEqual([c["id"] for c in chain], ["chain/chain_parity/manifest/synthetic:tiny/cpu_bf16"])
        self.assertEqual(chain[0]["verdict"], "green")
        metrics = {m["name"]: m["value"] for m in chain[0]["metrics"]}
        self.assertEqual((metrics["max_abs_dlogp"], metrics["active_tokens"]), (0, 27))
        for op in ops:
            for j in ("forward_accuracy", "gradient_accuracy", "forward_invariance", "gradient_invariance"):
                self.assertIn((op, j), judged)
        tiers = {c["tier"] for c in e["cells"] if c["judgment"].endswith("accuracy")}
        self.assertTrue({"short", "primary"} <= tiers, tiers)
        transforms = {c["transform"] for c in e["cells"] if c["judgment"].endswith("invariance")}
        for t in ("BN/chunked", "B1/full", "B1/chunked", "BN/permuted", "BN/padded_right",
                  "BN/padded_left", "layout", "tp2", "tp4", "tp8", "repeat"):
            self.assertIn(t, transforms)

    def test_stdout_matrix_has_a_row_per_op(self):
        rows = [l for l in self.stdout.splitlines() if l.startswith("cpu_bf16 ")]
        self.assertEqual(len(rows), 13)
        red_ops = {c["op"] for c in self.evidence["cells"] if c["verdict"] == "red"}
        for r in rows:
            self.assertEqual("RED" in r, r.split()[1] in red_ops, r)

    def test_junit_counts_match_evidence(self):
        root = check_junit(self, os.path.join(self.out, "junit.xml"), self.evidence)
        stages = [s for s in root.findall("testsuite") if s.get("name").endswith(".stages")]
        self.assertEqual(len(stages), 1)
        parity = [c for c in stages[0].findall("testcase") if c.get("name") == "parity"]
        self.assertIsNone(parity[0].find("skipped"))  # parity ran
        self.assertIsNone(parity[0].find("failure"))  # and passed

    def test_c8_rows_have_the_h20_keys(self):
        ours = load_json(os.path.join(self.out, "c8-execute.json"))
        theirs = load_json(H20)
        self.assertEqual(ours["schema_version"], "ws1-c8-execute-v2")
        self.assertEqual(list(ours), list(theirs))
        self.assertEqual(list(ours["cells"][0]), list(theirs["cells"][0]))
        key = lambda c: (c["op_name"], c["judgment"], c["tier"])
        mine = [key(c) for c in ours["cells"]]
        self.assertEqual({c["profile"] for c in ours["cells"]}, {"cpu_bf16"})
        for profile in ("cuda_bf16", "triton_cuda_bf16"):
            self.assertEqual(mine, [key(c) for c in theirs["cells"] if c["profile"] == profile])
        counts = {}
        for c in ours["cells"]:
            counts[c["status"]] = counts.get(c["status"], 0) + 1
        self.assertEqual(ours["counts"], counts)
        self.assertEqual(counts.get("N/A"), 8)  # pack, as upstream
        # A row is red exactly when one of its fixture cells is (every row here has cells).
        red_cells = {(c["op"], c["judgment"], c["tier"]) for c in self.evidence["cells"]
                     if c["verdict"] == "red" and c["op"] != "pack"}
        for c in ours["cells"]:
            if c["judgment"].endswith("accuracy"):
                self.assertEqual(c["status"] == "red", key(c) in red_cells, c)
        # The comparison printed by --compare-c8 against an independent count.
        status = {(c["profile"], key(c)): c["status"] for c in theirs["cells"]}
        differ = sum(1 for c in ours["cells"] for p in ("cuda_bf16", "triton_cuda_bf16")
                     if status[(p, key(c))] != c["status"])
        self.assertIn(f"c8 compare with {H20}: {differ} rows differ", self.stdout)

    def test_html_is_self_contained(self):
        text = read_text(os.path.join(self.out, "report.html"))
        for bad in ("http://", "https://", " src=", "<link", "@import", "url("):
            self.assertNotIn(bad, text)
        s = self.evidence["summary"]
        self.assertIn(f'data-green="{s["green"]}" data-red="{s["red"]}" data-na="{s["na"]}" '
                      f'data-total="{s["total"]}"', text)
        # The parity section: the chain cell with its |dlogp| chart and metric table.
        parity = text[text.index('<section id="parity">'):]
        parity = parity[:parity.index("</section>")]
        self.assertIn("chain/chain_parity/manifest/synthetic:tiny/cpu_bf16", parity)
        self.assertIn("<svg class=\"chart\"", parity)
        self.assertIn("<td>max_abs_dlogp</td>", parity)

    def test_html_renders_in_headless_chromium(self):
        chromium = find_chromium()
        if chromium is None:
            self.skipTest("chromium is not installed (tools/setup.sh --tests installs it)")
        with tempfile.TemporaryDirectory() as profile:
            p = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                "--disable-dev-shm-usage", "--no-first-run", f"--user-data-dir={profile}",
                                "--dump-dom", "file://" + os.path.join(self.out, "report.html")],
                               capture_output=True, text=True, timeout=180)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        dom = MatrixDom()
        dom.feed(p.stdout)
        s = self.evidence["summary"]
        self.assertEqual(dom.ready, "1", "the page's script did not run to its end")
        self.assertEqual(dom.squares, {"green": s["green"], "red": s["red"], "na": s["na"], "vacuous": s["vacuous"]})
        self.assertEqual(dom.rows, 14)  # one heat-map row per op on the one backend, and the chain
        r = dom.rendered
        self.assertEqual((int(r["data-green"]), int(r["data-red"]), int(r["data-na"]), int(r["data-total"]),
                          int(r["data-vacuous"])), (s["green"], s["red"], s["na"], s["total"], s["vacuous"]))


class GateVacuous(unittest.TestCase):
    def test_fail_vacuous_fails_the_gate_on_a_vacuous_cell(self):
        """silu's near_zero cell is vacuous on the smoke workload (an all-zero candidate passes
        it): the gate stays green by default and says so, and exits 1 under --fail-vacuous."""
        for flag, want in (([], 0), (["--fail-vacuous"], 1)):
            with tempfile.TemporaryDirectory() as d:
                rc, stdout, stderr = run("gate", "--backends", "cpu_bf16", "--ops", "silu", "--workload", SMOKE,
                                         "--out", d, "-q", *flag, cwd=ROOT)
                self.assertEqual(rc, want, stdout + stderr)
                e = load_json(os.path.join(d, "gate.json"))
                self.assertGreater(e["summary"]["vacuous"], 0)
                self.assertEqual(e["summary"]["red"], 0)
                self.assertRegex(stdout, r"(?m)^vacuous: \d+ cell\(s\)")
                self.assertRegex(stdout, r"(?m)^gate %s: " % ("red" if want else "green"))


class GateGreen(unittest.TestCase):
    def test_exit_0_when_every_cell_is_green(self):
        """Twelve ops (det_gemm's cells are in the full smoke gate above): every cell green, vacuous or
        N/A, the audit passes, exit 0, and the outputs agree."""
        ops = [o for o in ("embedding", "rms_norm", "qk_norm", "rope", "attention", "silu", "swiglu",
                           "lm_head", "logp", "batch_invariant_logp", "pack", "linear_logp")]
        with tempfile.TemporaryDirectory() as d:
            rc, stdout, stderr = run("gate", "--backends", "cpu_bf16", "--ops", ",".join(ops),
                                     "--workload", SMOKE, "--out", d, "-q", cwd=ROOT)
            self.assertEqual(rc, 0, stdout + stderr)
            e = load_json(os.path.join(d, "gate.json"))
            self.assertEqual(e["summary"]["red"], 0)
            self.assertEqual(e["verdict"], "green")
            self.assertRegex(stdout, r"(?m)^gate green: green \d+, red 0, ")
            c8 = load_json(os.path.join(d, "c8-execute.json"))
            self.assertEqual(len(c8["cells"]), 88)  # 11 C8 ops (linear_logp is not one) x 8
            self.assertEqual(c8["counts"], {"green": 80, "N/A": 8})
            root = check_junit(self, os.path.join(d, "junit.xml"), e)
            self.assertEqual(int(root.get("failures")), 0)


class GateExternal(unittest.TestCase):
    def test_exec_backend_rows_carry_the_id_it_announces(self):
        """An exec: worker (here ws1check's own, serving cpu_bf16) is keyed by the id it
        announces, in the matrix, the cells and the C8 rows alike: none is 'required untested'."""
        worker = "exec:{} worker --backend cpu_bf16".format(WS1CHECK)
        with tempfile.TemporaryDirectory() as d:
            rc, stdout, stderr = run("gate", "--backends", worker, "--ops", "silu,rms_norm",
                                     "--workload", SMOKE, "--out", d, "-q", cwd=ROOT)
            self.assertEqual(rc, 0, stdout + stderr)
            self.assertRegex(stdout, r"(?m)^cpu_bf16\s+silu\s+green")
            c8 = load_json(os.path.join(d, "c8-execute.json"))
            self.assertEqual({c["profile"] for c in c8["cells"]}, {"cpu_bf16"})
            rows = [c for c in c8["cells"] if c["op_name"] in ("silu", "rms_norm")]
            self.assertEqual(len(rows), 16)
            for c in rows:
                self.assertNotIn("required untested", c["detail"])
                self.assertIn(c["status"], ("green", "N/A"), c)
            e = load_json(os.path.join(d, "gate.json"))
            self.assertTrue(all(c["backend"]["expected"] == "cpu_bf16" for c in e["cells"]))


class GateOverlap(unittest.TestCase):
    def test_overlapped_backends_give_the_same_evidence(self):
        """--overlap-backends runs each backend's cells on its own thread: the evidence is the
        serial run's, cell for cell, but for the clocks (started / finished, per-stage times)."""
        proxy = os.path.join(ROOT, "test", "cli", "renamed_worker.py")
        worker = "exec:{} {} cpu_bf16_renamed {}".format(sys.executable, proxy, WS1CHECK)
        runs = {}
        with tempfile.TemporaryDirectory() as d:
            for mode in ("serial", "overlap"):
                out = os.path.join(d, mode)
                extra = ["--overlap-backends"] if mode == "overlap" else []
                rc, stdout, stderr = run("gate", "--backends", "cpu_bf16," + worker, "--ops", "silu,rms_norm,embedding",
                                         "--workload", SMOKE, "--out", out, "-q", *extra, cwd=ROOT)
                self.assertEqual(rc, 0, stdout + stderr)
                self.assertRegex(stdout, r"(?m)^cpu_bf16_renamed\s+silu\s+green")
                runs[mode] = load_json(os.path.join(out, "gate.json"))

        def without_clocks(e):
            e = json.loads(json.dumps(e))
            for k in ("started", "finished", "command"):
                e.pop(k, None)
            e["environment"].pop("captured_at", None)
            for c in e["cells"]:
                c.pop("timing", None)
            return e

        serial, overlap = without_clocks(runs["serial"]), without_clocks(runs["overlap"])
        self.assertEqual({c["backend"]["expected"] for c in serial["cells"]}, {"cpu_bf16", "cpu_bf16_renamed"})
        self.assertEqual([c["id"] for c in overlap["cells"]], [c["id"] for c in serial["cells"]])
        self.assertEqual(overlap, serial)


class GateRed(unittest.TestCase):
    def test_planted_red_cells(self):
        """A contract whose tolerances are 4096 times tighter: red accuracy cells, exit 1, and
        every output says so."""
        shrink = 2.0 ** -12

        def tighten(node):
            if isinstance(node, dict):
                for k, v in node.items():
                    if k in ("atol", "rtol") and isinstance(v, (int, float)) and not isinstance(v, bool):
                        node[k] = v * shrink
                    else:
                        tighten(v)
            elif isinstance(node, list):
                for v in node:
                    tighten(v)

        with tempfile.TemporaryDirectory() as d:
            contract = load_json(os.path.join(ROOT, "contracts", "ws1-c1-v2.json"))
            tighten(contract)
            tight = os.path.join(d, "tight.json")
            write_text(tight, json.dumps(contract, indent=2))
            out = os.path.join(d, "out")
            rc, stdout, stderr = run("gate", "--backends", "cpu_bf16", "--ops", "rms_norm,silu",
                                     "--workload", SMOKE, "--contract", tight, "--out", out, cwd=ROOT)
            self.assertEqual(rc, 1, stdout + stderr)
            self.assertNotIn("[gate ", stderr)  # stderr is not a terminal: no progress line
            self.assertEqual(sorted(os.listdir(out)), sorted(OUTPUTS))
            e = load_json(os.path.join(out, "gate.json"))
            self.assertGreater(e["summary"]["red"], 0)
            self.assertEqual({c["op"] for c in e["cells"]}, {"rms_norm", "silu", "qwen3_dense_chain"})
            for c in e["cells"]:
                if c["verdict"] == "red":
                    self.assertTrue(c["judgment"].endswith("_accuracy"), c["id"])
            root = check_junit(self, os.path.join(out, "junit.xml"), e)
            messages = [f.get("message") for f in root.iter("failure")]
            self.assertEqual(len(messages), e["summary"]["red"])
            for m in messages:
                self.assertIn("|err|/allowed", m)
            c8 = load_json(os.path.join(out, "c8-execute.json"))
            self.assertEqual(len(c8["cells"]), 16)
            red_rows = {(c["op_name"], c["tier"]) for c in c8["cells"] if c["status"] == "red"}
            self.assertTrue(red_rows)
            for c in c8["cells"]:
                if c["status"] == "red":
                    self.assertTrue(c["judgment"].endswith("_accuracy"), c)
            text = read_text(os.path.join(out, "report.html"))
            self.assertEqual(text.count('data-v="red"'), e["summary"]["red"])
            self.assertIn('id="verdict">red<', text)
            self.assertRegex(stdout, r"(?m)^gate red: ")
            self.assertRegex(stdout, r"(?m)^red: cpu_bf16/forward_accuracy/")


class GateInput(unittest.TestCase):
    def assert_refused(self, args, code=2, needle=None):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out")
            rc, stdout, stderr = run("gate", *args, "--workload", SMOKE, "--out", out, cwd=ROOT)
            self.assertEqual(rc, code, stdout + stderr)
            self.assertFalse(os.path.exists(out), "nothing is written on bad input")
            self.assertEqual(stdout, "")
            lines = stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, stderr)
            if needle:
                self.assertIn(needle, lines[0])

    def test_bad_options_exit_2_nothing_written(self):
        self.assert_refused([], needle="--backends")
        self.assert_refused(["--backends", "cpu_bf16,cpu_bf16"], needle="listed twice")
        self.assert_refused(["--backends", "cpu_bf16,"], needle="empty item")
        self.assert_refused(["--backends", "no_such_backend"])
        self.assert_refused(["--backends", "cpu_bf16", "--ops", "rms_norm,nope"], needle="nope")
        self.assert_refused(["--backends", "cpu_bf16", "--ops", "all,silu"], needle="all")

    def test_two_entries_answering_to_one_backend_exit_2(self):
        worker = "exec:{} worker --backend cpu_bf16".format(WS1CHECK)
        self.assert_refused(["--backends", "cpu_bf16," + worker, "--ops", "silu"],
                            needle="two entries run as backend cpu_bf16")

    def test_bad_compare_file_exit_2(self):
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "c8.json")
            write_text(bad, '{"schema_version": "something-else", "cells": []}')
            self.assert_refused(["--backends", "cpu_bf16", "--compare-c8", bad], needle=bad)

    def test_gpu_backend_without_device_exit_3(self):
        if os.path.exists("/dev/nvidia0"):
            self.skipTest("a GPU is present")
        self.assert_refused(["--backends", "cpu_bf16,cuda_bf16"], code=3, needle="cuda_bf16")


def run_on_tty(args):
    """Runs ws1check with stderr on a pseudo-terminal; returns (rc, what stderr showed)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([WS1CHECK, *args], stdout=subprocess.DEVNULL, stderr=slave, cwd=ROOT)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError as e:
            if e.errno != errno.EIO:
                raise
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return p.wait(timeout=600), b"".join(chunks).decode("utf-8", "replace")


class GateProgress(unittest.TestCase):
    def test_progress_on_a_terminal_and_not_with_q(self):
        with tempfile.TemporaryDirectory() as d:
            args = ["gate", "--backends", "cpu_bf16", "--ops", "silu", "--workload", SMOKE, "--out", d]
            rc, err = run_on_tty(args)
            self.assertEqual(rc, 0, err)
            lines = re.findall(r"\[gate (\d+)/(\d+) cells, [\d.]+ s\] ([^\r\x1b]*)", err)
            self.assertTrue(lines, err)
            total = int(lines[0][1])
            self.assertEqual(int(lines[-1][0]), total)  # ends with every cell done
            self.assertTrue(any("forward_accuracy silu/" in l[2] for l in lines), lines)
            self.assertTrue(any("gradient_invariance silu" in l[2] for l in lines), lines)
            rc, err = run_on_tty(args + ["-q"])
            self.assertEqual(rc, 0, err)
            self.assertNotIn("[gate ", err)


if __name__ == "__main__":
    WS1CHECK = os.path.abspath(sys.argv.pop(1))
    ROOT = os.path.abspath(sys.argv.pop(1))
    SMOKE = os.path.join(ROOT, "fixtures", "ws1-smoke.json")
    H20 = os.path.join(ROOT, "test", "data", "upstream", "ws1-c8-execute.h20.json")
    unittest.main(verbosity=2)
