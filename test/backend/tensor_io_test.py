"""The Python side of ws1-exec-v1's tensor files (python/ws1check/protocol.py TensorIO, numpy path; the
torch path shares its layout code): every dtype, 0-d and empty tensors round-trip bit for bit,
the file is valid safetensors (8-byte header length, space-padded JSON header, offsets that tile
the body), and the tensors read back share one buffer instead of copying the file.

Usage: tensor_io_test.py SOURCE_ROOT (skipped, exit 77, without numpy)."""
import json
import os
import struct
import sys
import tempfile
import unittest

try:
    import numpy as np
except ImportError:
    sys.exit(77)

sys.path.insert(0, os.path.join(sys.argv.pop(1), "python"))
from ws1check import protocol as ws1_exec  # noqa: E402


class TensorIOTest(unittest.TestCase):
    def test_round_trip(self):
        io = ws1_exec.TensorIO(None)
        rng = np.random.default_rng(7)
        tensors = {
            "f64": ("F64", rng.standard_normal((3, 5))),
            "i64": ("I64", rng.integers(-2**62, 2**62, (4,))),
            "f32": ("F32", rng.standard_normal((2, 3, 4)).astype(np.float32)),
            "i32": ("I32", rng.integers(-2**31, 2**31, (7,)).astype(np.int32)),
            "bf16": ("BF16", rng.integers(0, 2**16, (5, 2)).astype(np.uint16)),
            "f16": ("F16", rng.standard_normal((3,)).astype(np.float16)),
            "u8": ("U8", rng.integers(0, 256, (9,)).astype(np.uint8)),
            "bool": ("BOOL", rng.integers(0, 2, (2, 2)).astype(np.bool_)),
            "scalar": ("F32", np.array(1.5, np.float32)),
            "empty": ("BF16", np.zeros((0, 4), np.uint16)),
        }
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.safetensors")
            io.write(path, tensors)
            with open(path, "rb") as f:
                data = f.read()
            (n,) = struct.unpack("<Q", data[:8])
            self.assertEqual(n % 8, 0)
            header = json.loads(data[8:8 + n])
            ends = sorted(e["data_offsets"] for e in header.values())
            self.assertEqual(ends[0][0], 0)
            self.assertEqual(ends[-1][1], len(data) - 8 - n)
            for a, b in zip(ends, ends[1:]):
                self.assertEqual(a[1], b[0])
            back = io.read(path)
        self.assertEqual(set(back), set(tensors))
        buffers = set()
        for name, (dtype, array) in tensors.items():
            got_dtype, got = back[name]
            self.assertEqual(got_dtype, dtype, name)
            self.assertEqual(got.shape, array.shape, name)
            self.assertEqual(got.tobytes(), np.ascontiguousarray(array).tobytes(), name)
            if got.size:
                root = got
                while isinstance(root, np.ndarray) and root.base is not None:
                    root = root.base
                buffers.add(id(root.obj if isinstance(root, memoryview) else root))
        self.assertEqual(len(buffers), 1, "the tensors read back should share the file's one buffer")


if __name__ == "__main__":
    unittest.main()
