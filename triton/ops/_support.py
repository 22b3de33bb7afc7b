"""Shared helpers of the Triton op modules (triton/ops/<op>.py); nothing op-specific lives here.

The worker skips files starting with "_", so this module is imported by the op modules:

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _support as S

API (all that other modules may rely on):
  OpInputError, require(cond, op, name, problem)
      Bad input: raised with the message "<op>: <name>: <problem>", as lib/ops' require()
      words it; the worker turns it into the request's error reply.
  tensor_input(tensors, op, name, dtype, rank=None), bf16_input(tensors, op, name, rank=None),
  like_input(tensors, op, name, shape)
      A request tensor by name, checked like lib/ops' input(): present, of `dtype`, of `rank`
      dimensions (None: any); like_input: bf16 with exactly `shape`.
  shape_string(shape)
      "[8, 4096]", the C++ side's shape_string().
  DEVICE
      "cuda": where to_device() and poisoned() put tensors.
  to_device(t), to_host(t)
      A dense row-major copy on the GPU (as cuda_bf16 uploads every input, D16), and back to a
      CPU tensor for the reply.
  poisoned(shape, dtype)
      A GPU tensor whose bytes are all 0xFF (NaN for bf16 and float32, -1 for integers), so an
      element a kernel forgets to write reads as a NaN the judges flag, never a plausible 0 (D16).
  pointer_arg(t)
      `t`, or a one-element stand-in when `t` has no elements, for pointer arguments of kernels
      that will not dereference them (an empty tensor may have no device address).
  f32(value)
      The float32 rounding (nearest even) of a Python float, as a Python float: pass scalar
      constants such as eps through it so the value a kernel sees is the one the C++ side's
      static_cast<float> gives, whatever the launcher's conversion does.
  launch(kernel, grid, *args, **meta)
      kernel[grid](*args, enable_fp_fusion=False, enable_reflect_ftz=False, **meta), nothing
      when the grid is empty. Fusion off: the compiler may not contract a*b + c into an FMA, so
      every multiply and add rounds once as written, like the cuda_bf16 kernels' __fmul_rn /
      __fadd_rn; an FMA is written out with tl.fma where the definition has one. reflect_ftz
      off: libdevice functions (expf, ...) keep subnormals, as CUDA's do without fast math
      (Triton's default flushes them to zero).
  round_bf16(x)   (@triton.jit, call it inside kernels)
      float32 -> the float32 value of its bf16 rounding (nearest even; NaN stays NaN, overflow
      goes to inf), done on the bits. Use it for every intermediate bf16 rounding that is
      computed on afterwards: Triton can fold x.to(tl.bfloat16).to(tl.float32) away. A final
      `.to(tl.bfloat16)` that is stored is a real rounding and needs no helper.
  kernel_id(op, direction, kernels), kernel_entries(op, forward=None, backward=None)
      "ws1.triton_cuda_bf16.<op>.<direction>[<kernel names>]" and the KERNELS dict of one op:
      forward / backward are (kernels, fn) pairs, kernels a list of @triton.jit functions or
      names, fn(tensors, context) -> {name: CPU tensor}.
  cdiv(a, b)
      ceil(a / b) for grid sizes.

Precision notes shared by every module: bf16 -> float32 is exact; float32 -> bf16 is
`.to(tl.bfloat16)`, round to nearest even; a float32 division or square root that a definition
contains is tl.div_rn / tl.sqrt_rn (IEEE), never `/` or tl.sqrt, which lower to approximations.
"""
import struct

import torch

import triton
import triton.language as tl

BACKEND = "triton_cuda_bf16"
DEVICE = "cuda"


class OpInputError(ValueError):
    """An input the op refuses; str() is "<op>: <name>: <problem>"."""


def require(cond, op, name, problem):
    if not cond:
        raise OpInputError(f"{op}: {name}: {problem}")


def shape_string(shape):
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"


_SAFETENSORS_NAMES = {torch.bfloat16: "BF16", torch.float32: "F32", torch.float64: "F64", torch.float16: "F16",
                      torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL"}


def _dtype_name(dtype):
    return _SAFETENSORS_NAMES.get(dtype, str(dtype))


def tensor_input(tensors, op, name, dtype, rank=None):
    t = tensors.get(name)
    require(t is not None, op, name, "missing input")
    require(t.dtype == dtype, op, name, f"dtype {_dtype_name(t.dtype)} (expected {_dtype_name(dtype)})")
    require(rank is None or t.dim() == rank, op, name, f"shape {shape_string(t.shape)} (expected rank {rank})")
    return t


def bf16_input(tensors, op, name, rank=None):
    return tensor_input(tensors, op, name, torch.bfloat16, rank)


def like_input(tensors, op, name, shape):
    t = bf16_input(tensors, op, name)
    require(list(t.shape) == list(shape), op, name,
            f"shape {shape_string(t.shape)} (expected {shape_string(shape)})")
    return t


def to_device(t):
    return t.contiguous().to(DEVICE)


def to_host(t):
    return t.to("cpu")


def poisoned(shape, dtype):
    t = torch.empty(tuple(int(d) for d in shape), dtype=dtype, device=DEVICE)
    if t.numel() > 0:
        t.view(torch.uint8).fill_(0xFF)
    return t


def pointer_arg(t):
    return t if t.numel() > 0 else torch.zeros(1, dtype=t.dtype, device=DEVICE)


def f32(value):
    return struct.unpack("<f", struct.pack("<f", float(value)))[0]


def launch(kernel, grid, *args, **meta):
    grid = tuple(int(g) for g in grid)
    if any(g <= 0 for g in grid):
        return
    meta.setdefault("enable_fp_fusion", False)
    meta.setdefault("enable_reflect_ftz", False)
    kernel[grid](*args, **meta)


@triton.jit
def round_bf16(x):
    bits = x.to(tl.uint32, bitcast=True)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).to(tl.float32, bitcast=True)
    return tl.where(x != x, x, rounded)


def _kernel_name(k):
    if isinstance(k, str):
        return k
    return getattr(getattr(k, "fn", k), "__name__")


def kernel_id(op, direction, kernels):
    return f"ws1.{BACKEND}.{op}.{direction}[{','.join(_kernel_name(k) for k in kernels)}]"


def kernel_entries(op, forward=None, backward=None):
    entries = {}
    for direction, pair in (("forward", forward), ("backward", backward)):
        if pair is not None:
            kernels, fn = pair
            entries[(op, direction)] = (kernel_id(op, direction, kernels), fn)
    return entries


def cdiv(a, b):
    return triton.cdiv(int(a), int(b))
