#!/usr/bin/env python3
"""`ws1check worker --backend cpu_bf16` under another backend id: every line passes through
unchanged but the worker's hello, whose "backend" becomes ID. Lets a CPU test run a gate over
two backends (cpu_bf16 and this one) that ws1check keys apart.

Usage (as an exec: command): renamed_worker.py ID WS1CHECK"""
import json
import subprocess
import sys
import threading


def main():
    backend_id, ws1check = sys.argv[1], sys.argv[2]
    child = subprocess.Popen([ws1check, "worker", "--backend", "cpu_bf16"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, bufsize=1)

    def requests():
        for line in sys.stdin:
            child.stdin.write(line)
            child.stdin.flush()
        child.stdin.close()

    threading.Thread(target=requests, daemon=True).start()
    first = True
    for line in child.stdout:
        if first:
            hello = json.loads(line)
            hello["backend"] = backend_id
            line = json.dumps(hello) + "\n"
            first = False
        sys.stdout.write(line)
        sys.stdout.flush()
    sys.exit(child.wait())


if __name__ == "__main__":
    main()
