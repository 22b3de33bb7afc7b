"""Serve your own PyTorch callables to ws1check as an external candidate (ws1-exec-v1).

    import torch
    import ws1check

    def rms_norm(t, ctx):
        x = t["x"].float()
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + ctx["rms_norm_eps"]) * t["weight"].float()
        return {"y": y.to(torch.bfloat16)}

    ws1check.serve({"rms_norm": {"forward": rms_norm}}, backend="my_kernels")

and then `ws1check accuracy --op rms_norm --backend "exec:python3 my_worker.py"`.

A function takes (tensors, context): tensors by the op's names (`ws1check ops --op NAME`:
backward inputs are the forward inputs plus `dy.<output>`), as torch tensors on `device`;
context is the op's context as ws1check sent it (rms_norm_eps, rope_theta, head counts, ...).
It returns the op's outputs (backward: `d<input>`) by name, as torch tensors on any device, in
the op's dtypes. What is not served is not provided: ws1check reports those cells red.

serve() takes the process's stdout for the protocol first (anything printed afterwards goes to
stderr), answers until ws1check shuts the worker down, and returns the exit status to pass to
sys.exit. A function that raises is reported as that cell's failure; serving goes on.
"""
import platform

from . import protocol

__all__ = ["serve", "protocol"]

DIRECTIONS = ("forward", "backward")


def _kernel_id(backend, op, direction, fn):
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    module = getattr(fn, "__module__", None)
    return f"{backend}.{op}.{direction}:{module + '.' if module else ''}{name}"


def _readback(torch, device):
    def readback():
        on_cuda = device.type == "cuda"
        if on_cuda:
            name = torch.cuda.get_device_name(device)
            tf32 = bool(torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32)
        else:
            name = f"{device.type} ({platform.machine()}, torch {torch.__version__})"
            tf32 = None  # no TF32-capable unit on a CPU path
        try:
            autocast = torch.is_autocast_enabled(device.type)
        except TypeError:  # torch before 2.4 takes no device type
            autocast = torch.is_autocast_enabled() if on_cuda else torch.is_autocast_cpu_enabled()
        return {"device": name, "tf32_enabled": tf32, "cublas_math_mode": None,
                "autocast": "torch autocast " + ("enabled" if autocast else "disabled")}

    return readback


def _wrap(fn, device, torch, what):
    def run(tensors, context):
        outputs = fn({name: t.to(device) for name, t in tensors.items()}, context)
        if not isinstance(outputs, dict) or not all(isinstance(t, torch.Tensor) for t in outputs.values()):
            raise TypeError(f"{what} returned {type(outputs).__name__}, not a dict of torch tensors by output name")
        return outputs

    return run


def serve(ops, backend, device=None, kernel_ids=None, input_cache_bytes=0):
    """ops: {op: {"forward" | "backward": function(tensors, context) -> {name: tensor}}}.
    backend: the profile name ws1check reports ([A-Za-z0-9_.-], at most 64 characters).
    device: where the inputs are put (a torch.device or string; default cuda when available,
    else cpu). kernel_ids: {(op, direction): id}, else "<backend>.<op>.<direction>:<function>".
    input_cache_bytes: > 0 offers ws1check an input cache of that size, kept on `device`.
    Returns the exit status (0 after a shutdown)."""
    channel = protocol.take_stdout()  # first: nothing else may reach the protocol stream
    import torch

    device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    kernel_ids = kernel_ids or {}
    kernels = {}
    for op, directions in ops.items():
        for direction, fn in directions.items():
            if direction not in DIRECTIONS:
                raise ValueError(f"ws1check.serve: {op}: direction {direction!r} is not one of {DIRECTIONS}")
            if not callable(fn):
                raise TypeError(f"ws1check.serve: {op} {direction}: {type(fn).__name__} is not callable")
            kernel_id = kernel_ids.get((op, direction)) or _kernel_id(backend, op, direction, fn)
            kernels[(op, direction)] = (kernel_id, _wrap(fn, device, torch, f"{op} {direction}"))
    return protocol.serve(channel, backend, kernels, _readback(torch, device), protocol.TensorIO(torch),
                          cache_bytes=input_cache_bytes, keep=lambda t: t.to(device))
