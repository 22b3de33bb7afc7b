#!/usr/bin/env python3
"""A minimal ws1-exec-v1 worker (docs/external-backend.md): silu forward, in numpy.

    ws1check accuracy --op silu --backend "exec:python3 docs/examples/exec_worker_silu.py"

ws1check writes one JSON object per line on our stdin (hello, run, shutdown) and reads one per
line from our stdout (hello, result or error). Tensors travel as safetensors files in a private
directory ws1check creates: a run request names the input file and the output file to write.
Nothing but protocol lines may reach stdout; logs go to stderr.

bf16 has no numpy dtype: it is kept as its raw uint16 bits, widened to float32 to compute and
rounded back to bf16 once (round to nearest even), as the standard's candidates do.
"""
import json
import struct
import sys

import numpy as np

PROTOCOL = "ws1-exec-v1"
BACKEND = "example_numpy"
READBACK = {"device": "cpu (numpy)", "tf32_enabled": None, "cublas_math_mode": None}
NUMPY = {"BF16": np.uint16, "F32": np.float32, "I64": np.int64, "BOOL": np.bool_}


def read_safetensors(path):
    """{name: (dtype, array)}; a BF16 array holds the raw bits."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header, body = json.loads(data[8:8 + n]), data[8 + n:]
    header.pop("__metadata__", None)
    return {name: (e["dtype"], np.frombuffer(body[e["data_offsets"][0]:e["data_offsets"][1]],
                                             NUMPY[e["dtype"]]).reshape(e["shape"]))
            for name, e in header.items()}


def write_safetensors(path, tensors):
    """tensors: {name: (dtype, array)}, written in the order given."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, array) in tensors.items():
        raw = np.ascontiguousarray(array, NUMPY[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """Round to nearest even; NaN stays a (quiet) NaN."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), bits)


def silu_forward(tensors, context):
    """y = x * sigmoid(x), per element in float32, rounded once to bf16."""
    x = bf16_to_f32(tensors["x"][1])
    with np.errstate(over="ignore"):
        y = x * (np.float32(1) / (np.float32(1) + np.exp(-x)))
    return {"y": ("BF16", f32_to_bf16(y))}


# (op, direction) -> (kernel id, function(tensors, context) -> tensors)
OPS = {("silu", "forward"): ("example_numpy.silu.forward.v1", silu_forward)}


def reply(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request):
    kernel_id, run = OPS[(request["op"], request["direction"])]
    try:
        write_safetensors(request["output_file"], run(read_safetensors(request["input_file"]), request["context"]))
    except Exception as e:  # the op failed: an error reply, and serving goes on
        return {"type": "error", "id": request["id"], "message": f"{type(e).__name__}: {e}"}
    return {"type": "result", "id": request["id"], "output_file": request["output_file"],
            "kernel_id": kernel_id, "readback": READBACK}


def main():
    for line in sys.stdin:
        message = json.loads(line)
        if message["type"] == "hello":
            if message["protocol"] != PROTOCOL:
                reply({"type": "error", "message": f"this worker speaks {PROTOCOL}"})
                return 3
            ops = {}
            for (op, direction), (kernel_id, _) in OPS.items():
                ops.setdefault(op, {})[direction] = kernel_id
            reply({"type": "hello", "protocol": PROTOCOL, "backend": BACKEND, "ops": ops, "readback": READBACK})
        elif message["type"] == "run":
            reply(answer(message))
        elif message["type"] == "shutdown":
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
