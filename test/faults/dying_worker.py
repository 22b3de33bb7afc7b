#!/usr/bin/env python3
"""A ws1-exec-v1 worker that dies by SIGKILL inside a request (test/faults/worker_death_test.py).

It relays every line to `ws1check worker --backend cpu_bf16` and back, announcing the backend id
`dying_cpu`. On its KILL_AT-th run request (0: never) it passes the request on, waits for the
kernel's reply, says so on stderr and kills itself (SIGKILL) before answering: a worker dying in
the middle of a request, after its kernel ran. With KILL_AT 0 it is a faithful relay: the twin.

Usage (as an exec: command): dying_worker.py WS1CHECK KILL_AT [PID_FILE]
  PID_FILE gets "its pid, its child's pid", for the test to check that both are gone."""
import json
import os
import signal
import subprocess
import sys


def main():
    ws1check, kill_at = sys.argv[1], int(sys.argv[2])
    child = subprocess.Popen([ws1check, "worker", "--backend", "cpu_bf16"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, bufsize=1)
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w") as f:
            f.write(f"{os.getpid()} {child.pid}\n")
    runs = 0
    for line in sys.stdin:
        message = json.loads(line)
        child.stdin.write(line)
        child.stdin.flush()
        if message["type"] == "shutdown":
            break
        reply = child.stdout.readline()
        if not reply:
            print("dying_worker: the ws1check worker closed its stdout", file=sys.stderr, flush=True)
            return 1
        if message["type"] == "hello":
            hello = json.loads(reply)
            hello["backend"] = "dying_cpu"
            reply = json.dumps(hello) + "\n"
        elif message["type"] == "run":
            runs += 1
            if runs == kill_at:
                print(f"dying_worker: SIGKILL inside request {message['id']} ({message['op']} "
                      f"{message['direction']})", file=sys.stderr, flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
        sys.stdout.write(reply)
        sys.stdout.flush()
    child.stdin.close()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
