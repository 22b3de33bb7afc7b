#!/usr/bin/env python3
"""The triton_cuda_bf16 profile: the project's Triton kernels served to ws1check over
ws1-exec-v1 (docs/external-backend.md). `ws1check ... --backend triton_cuda_bf16` runs
`python3 triton/ws1_worker.py` ($WS1CHECK_PYTHON instead of python3 when set).

The kernels live in triton/ops/<op>.py, one module per op, each with a dict
KERNELS[(op, "forward"|"backward")] = (kernel_id, function), where function(tensors, context)
takes the request's tensors (torch CPU tensors by name) and the op context (rms_norm_eps,
rope_theta, num_attention_heads, ..., det_gemm's k_shards and k_partial: the request's JSON
object as a dict, passed as it came; each op checks the keys it reads and takes a missing
optional one at its default) and returns the op's outputs by name (bf16, logprobs float32,
det_gemm's c float32 under k_partial; each goes back with its tensor's dtype), computed by
Triton kernels: no PyTorch stand-ins. An op whose module is missing (or
whose module fails to import: the error goes to stderr) is not announced, and ws1check reports
its cells red with "not provided by the worker".

Readbacks are read, not assumed: the device torch sees, and TF32 as torch's matmul and cuDNN
flags stand after this worker switched them off (spec 2.1: no TF32 on the candidate path).
"""
import os
import sys

# The protocol package sits beside triton/ in the source tree and in <prefix>/share/ws1check.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
from ws1check import protocol as ws1_exec  # noqa: E402

BACKEND = "triton_cuda_bf16"


def load_kernels():
    """(op, direction) -> (kernel id, function) from every module of triton/ops/."""
    import importlib.util
    kernels = {}
    ops_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops")
    if not os.path.isdir(ops_dir):
        return kernels
    for name in sorted(os.listdir(ops_dir)):
        if not name.endswith(".py") or name.startswith("_"):
            continue
        try:
            spec = importlib.util.spec_from_file_location("ws1_triton_" + name[:-3], os.path.join(ops_dir, name))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except Exception as e:  # an op that does not load is not announced; say why on stderr
            print(f"triton/ops/{name}: not loaded: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        kernels.update(getattr(module, "KERNELS", {}))
    return kernels


def disable_tf32(torch):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def readback_of(torch):
    if torch is None:
        return lambda: {"device": "cpu (torch is not importable)", "tf32_enabled": None, "cublas_math_mode": None}

    def readback():
        cuda = torch.cuda.is_available()
        device = torch.cuda.get_device_name(0) if cuda else "cpu (torch sees no CUDA device)"
        tf32 = bool(torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32) if cuda else None
        try:
            autocast = torch.is_autocast_enabled("cuda")
        except TypeError:  # torch before 2.4 takes no device type
            autocast = torch.is_autocast_enabled()
        return {"device": device, "tf32_enabled": tf32, "cublas_math_mode": None,
                "autocast": "torch autocast " + ("enabled" if autocast else "disabled")}

    return readback


def input_cache_of(torch):
    """(capacity, keep): inputs ws1check asks to keep live on the GPU (a weight crosses the
    exchange and the PCIe bus once), in at most a quarter of its memory and 24 GiB; none without
    a GPU. WS1CHECK_TRITON_INPUT_CACHE_BYTES sets the capacity (0: no cache)."""
    if torch is None or not torch.cuda.is_available():
        return 0, None
    capacity = min(24 << 30, torch.cuda.get_device_properties(0).total_memory // 4)
    capacity = int(os.environ.get("WS1CHECK_TRITON_INPUT_CACHE_BYTES", capacity))
    return capacity, lambda t: t.to("cuda")


def main():
    channel = ws1_exec.take_stdout()  # first: nothing else may reach the protocol stream
    torch = ws1_exec.import_torch()
    if torch is not None:
        disable_tf32(torch)
    capacity, keep = input_cache_of(torch)
    return ws1_exec.serve(channel, BACKEND, load_kernels(), readback_of(torch), ws1_exec.TensorIO(torch),
                          cache_bytes=capacity, keep=keep)


if __name__ == "__main__":
    sys.exit(main())
