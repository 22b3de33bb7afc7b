"""The worker side of ws1-exec-v1 (docs/external-backend.md): the protocol, under the Triton
profile (triton/ws1_worker.py) and ws1check.serve (this package's __init__).

- take_stdout(): fd 1 is kept for protocol lines only; everything else that prints (Python's
  print, warnings, C libraries, Triton's compiler) lands on stderr, which ws1check quotes in
  its errors. Call it first, before importing anything that might print.
- read_tensors / write_tensors: safetensors files as torch CPU tensors when torch is
  importable, else as (dtype, numpy array) pairs (bf16 as raw uint16 bits).
- serve(): the hello, then one reply per run request, until shutdown or end of input; with
  cache_bytes > 0 it announces an input cache of that capacity and keeps the inputs ws1check
  asks it to keep (as keep(tensor) makes them: the Triton worker keeps them on the GPU).
"""
import json
import math
import os
import struct
import sys
import traceback

PROTOCOL = "ws1-exec-v1"
ELEMENT_BYTES = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "BF16": 2, "F16": 2, "U8": 1, "BOOL": 1}


def take_stdout():
    """A private line-buffered stream on the original stdout; fd 1 and sys.stdout become stderr."""
    channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return channel


def import_torch():
    """torch, or None where it cannot be imported (then tensors are numpy arrays)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


class TensorIO:
    """safetensors <-> tensors, with torch or with numpy."""

    def __init__(self, torch):
        self.torch = torch
        if torch is not None:
            self.to_torch = {"F64": torch.float64, "I64": torch.int64, "F32": torch.float32, "I32": torch.int32,
                             "BF16": torch.bfloat16, "F16": torch.float16, "U8": torch.uint8, "BOOL": torch.bool}
            self.from_torch = {v: k for k, v in self.to_torch.items()}

    def _numpy(self, dtype):
        import numpy as np
        return {"F64": np.float64, "I64": np.int64, "F32": np.float32, "I32": np.int32, "BF16": np.uint16,
                "F16": np.float16, "U8": np.uint8, "BOOL": np.bool_}[dtype]

    def decode(self, dtype, shape, buf, begin):
        """The tensor at byte `begin` of `buf` (a bytearray holding the whole file), sharing its
        memory: no copy of the file's bytes is made."""
        numel = math.prod(shape)
        if self.torch is None:
            import numpy as np
            return dtype, np.frombuffer(buf, self._numpy(dtype), count=numel, offset=begin).reshape(shape)
        if numel == 0:
            return self.torch.empty(shape, dtype=self.to_torch[dtype])
        return self.torch.frombuffer(buf, dtype=self.to_torch[dtype], count=numel, offset=begin).reshape(shape)

    def encode(self, tensor):
        """(dtype, shape, raw) of a torch tensor (any device) or a (dtype, array) pair; raw is a
        flat uint8 view of a contiguous host copy (it supports the buffer protocol)."""
        if self.torch is not None and isinstance(tensor, self.torch.Tensor):
            t = tensor.detach().to("cpu").contiguous()
            return self.from_torch[t.dtype], list(t.shape), t.reshape(-1).view(self.torch.uint8).numpy()
        import numpy as np
        dtype, array = tensor
        shape = list(np.shape(array))  # (ascontiguousarray makes a 0-d array 1-d)
        return dtype, shape, np.ascontiguousarray(array, self._numpy(dtype)).reshape(-1).view(np.uint8)

    def read(self, path):
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            buf = bytearray(size)
            view, got = memoryview(buf), 0
            while got < size:
                n = f.readinto(view[got:])
                if not n:
                    raise EOFError(f"{path}: {got} of {size} bytes (did the file change while being read?)")
                got += n
        (n,) = struct.unpack_from("<Q", buf, 0)
        header, body = json.loads(bytes(view[8:8 + n])), 8 + n
        header.pop("__metadata__", None)
        return {name: self.decode(e["dtype"], e["shape"], buf, body + e["data_offsets"][0])
                for name, e in header.items()}

    def write(self, path, tensors):
        header, blobs, offset = {}, [], 0
        for name, tensor in tensors.items():
            dtype, shape, raw = self.encode(tensor)
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
            blobs.append(raw)
            offset += len(raw)
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text)
            for raw in blobs:
                f.write(raw)


class InputCache:
    """The inputs ws1check asked to keep, by content key, within `capacity` bytes."""

    def __init__(self, capacity, keep, nbytes):
        self.capacity, self.keep, self.nbytes = capacity, keep, nbytes
        self.held, self.used = {}, 0

    def apply(self, request, tensors):
        """Drops request["evict"], keeps request["store"] from the file's tensors, adds request["cached"]."""
        for key in request.get("evict", []):
            if key in self.held:
                self.used -= self.nbytes(self.held.pop(key))
        for name, key in request.get("store", {}).items():
            if name not in tensors:
                raise KeyError(f"input cache: store: no input {name!r} in the file to keep")
            if key in self.held:
                continue
            size = self.nbytes(tensors[name])
            if self.used + size > self.capacity:
                raise MemoryError(f"input cache: store: keeping {name!r} ({size} bytes) would exceed the "
                                  f"announced {self.capacity} bytes ({self.used} held)")
            self.held[key] = self.keep(tensors[name])
            self.used += size
            tensors[name] = self.held[key]
        for name, key in request.get("cached", {}).items():
            if key not in self.held:
                raise KeyError(f"input cache: cached: {name!r}: no tensor kept under {key}")
            tensors[name] = self.held[key]
        return tensors


def nbytes_of(tensor):
    """Bytes of a torch tensor or a (dtype, numpy array) pair."""
    if isinstance(tensor, tuple):
        return tensor[1].nbytes
    return tensor.numel() * tensor.element_size()


def serve(channel, backend, kernels, readback, io, cache_bytes=0, keep=lambda t: t):
    """kernels: {(op, "forward"|"backward"): (kernel_id, function(tensors, context) -> tensors)};
    readback(): the readback dict, read at the hello and after every request."""
    cache = InputCache(cache_bytes, keep, nbytes_of) if cache_bytes > 0 else None

    def reply(message):
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    def answer(request):
        rid = request["id"]
        entry = kernels.get((request["op"], request["direction"]))
        if entry is None:
            return {"type": "error", "id": rid, "message": f"{request['op']} {request['direction']}: not provided"}
        kernel_id, run = entry
        try:
            tensors = io.read(request["input_file"])
            if cache is not None:
                tensors = cache.apply(request, tensors)
            elif any(k in request for k in ("cached", "store", "evict")):
                raise ValueError("input cache: this worker announced none")
            io.write(request["output_file"], run(tensors, request["context"]))
        except Exception as e:  # the kernel failed: say so, and keep serving
            traceback.print_exc(file=sys.stderr)
            return {"type": "error", "id": rid, "message": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
        return {"type": "result", "id": rid, "output_file": request["output_file"], "kernel_id": kernel_id,
                "readback": readback()}

    for line in sys.stdin:
        message = json.loads(line)
        kind = message.get("type")
        if kind == "hello":
            if message.get("protocol") != PROTOCOL:
                reply({"type": "error", "message": f"this worker speaks {PROTOCOL}, not {message.get('protocol')}"})
                return 3
            ops = {}
            for (op, direction), (kernel_id, _) in sorted(kernels.items()):
                ops.setdefault(op, {})[direction] = kernel_id
            hello = {"type": "hello", "protocol": PROTOCOL, "backend": backend, "ops": ops, "readback": readback()}
            if cache is not None:
                hello["input_cache_bytes"] = cache_bytes
            reply(hello)
        elif kind == "run":
            reply(answer(message))
        elif kind == "shutdown":
            break
        else:
            print(f"ws1check.protocol: unexpected message type {kind!r}", file=sys.stderr)
            return 2
    return 0
