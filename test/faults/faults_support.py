"""Shared by the fault tests (test/faults/*_test.py): what a complete output file is, and which
names may sit in an --out directory (stdlib only)."""
import json
import os
import re
import xml.etree.ElementTree as ET

GATE_OUTPUTS = ("gate.json", "c8-execute.json", "junit.xml", "report.html")
# lib/evidence/atomic_write.cpp's temporary name: hidden, beside the target, mkstemp's suffix.
TEMP_NAME = re.compile(r"^\.(.+)\.tmp-[A-Za-z0-9]{6}$")


def complete_problem(path):
    """None when the file at `path` is a complete output of its kind, else what is wrong."""
    name = os.path.basename(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return f"cannot read: {e}"
    if not data:
        return "empty"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"not UTF-8: {e}"
    if name.endswith(".json"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            return f"not valid JSON: {e}"
        if not isinstance(doc, dict):
            return "not a JSON object"
        if name != "c8-execute.json" and not doc.get("cells"):
            return "evidence without cells"
        return None
    if name.endswith(".xml"):
        try:
            root = ET.fromstring(text)
        except ET.ParseError as e:
            return f"not well-formed XML: {e}"
        return None if root.tag == "testsuites" else f"root element {root.tag}"
    if name.endswith(".html"):
        return None if text.rstrip().endswith("</html>") else "does not end with </html>"
    return "unexpected file"


def check_out_dir(test, out, finals, context=""):
    """Every name in `out` is one of `finals` and complete, or a hidden temporary file of one of
    them. Returns (final names present, temporary names present)."""
    present, temps = [], []
    for name in sorted(os.listdir(out)) if os.path.isdir(out) else []:
        m = TEMP_NAME.match(name)
        if m:
            test.assertIn(m.group(1), finals, f"{context}: temporary file of an unknown output: {name}")
            temps.append(name)
            continue
        test.assertIn(name, finals, f"{context}: unexpected file {name} in --out")
        problem = complete_problem(os.path.join(out, name))
        test.assertIsNone(problem, f"{context}: {name} at its final name is not complete: {problem}")
        present.append(name)
    return present, temps
