#!/usr/bin/env python3
"""det_gemm against its peers on the GPU, at the Qwen3-8B projection shapes.

Usage (on the GPU machine, from the repository root; torch and triton installed, nothing of the
project built): python3 tools/bench/gemm_peers.py --out PATH.json [--quick] [--sweep SECONDS]
(--sweep: afterwards, the SWEEP launch configurations of det_gemm at M = 8192, timed, then the
identity checks under each, for up to SECONDS; recorded under "sweep").

Peers, each timed forward (c = a @ b, 2MNK flops) and backward (da = dy @ b^T and db = a^T @ dy,
4MNK flops):
  cublas     torch.matmul (cuBLAS), TF32 off;
  triton     a plain fixed-config Triton GEMM, the one a user would write: 128x256x64 tiles,
             8 warps, 3 stages, grouped tile order, FP32 accumulator, no split-K (plain_gemm);
  det_gemm   the project's triton_cuda_bf16 det_gemm (triton/ops/det_gemm.py): the forward
             with k_shards = 2 (the contract's split), the backward's two products;
  det_gemm_k1  its forward unsplit (k_shards = 1), for the split's cost.
Shapes: q/o (K 4096 -> N 4096), k/v (4096 -> 1024), gate/up (4096 -> 12288), down (12288 ->
4096), at M = 8192 (a training micro-batch) and the decode rows M = 1, 8, 64. Data: random
normal bf16 (never zeros). Timing: triton.testing.do_bench, the median, which clears the L2
(writes a 256 MB buffer) before every run. Ratio: cuBLAS's time / the peer's (TFLOP/s over
cuBLAS's TFLOP/s).

Checks (printed and recorded; each has "pass"):
  rows_m59        the plain Triton GEMM's (and det_gemm's) rows at M = 59 equal the same rows
                  at M = 8192 bit for bit (batch invariance), per projection shape;
  k_partial       det_gemm's k_shards = 2 forward equals bf16(p0 + p1) of two k_partial calls
                  on the K halves, bit for bit: through the module's forward() (CPU tensors and
                  the op context, c returned as float32) and on the device at the projection
                  shapes, an odd K, and k_shards = 3 against ((p0 + p1) + p2);
  context         bad k_shards / k_partial values give one-line errors naming the field;
  cancellation    small-integer inputs (|a|, |b| <= 15): the first half of K sums to large odd
                  integers (not representable in bf16, exact in FP32), the second half cancels
                  it up to a remainder |c| <= 45 (exact in bf16): every FP32-accumulating GEMM
                  gives the exact result bit for bit (a bf16 intermediate would not);
                  forward for every peer, and det_gemm's da and db;
  accuracy        max |x - fp32 reference| / max |reference| of det_gemm c, da, db at ragged
                  shapes (tails in M, N, K and in the shards), against 2^-8.
Output: --out PATH (JSON: environment, rows, checks), rewritten after every section; a short
table on stdout, last.
"""
import argparse
import json
import os
import sys
import time

import torch

import triton
import triton.language as tl
import triton.testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from json_record import JsonRecord  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "triton", "ops"))
import det_gemm as DG  # noqa: E402
import _support as S  # noqa: E402

SHAPES = [("q/o", 4096, 4096), ("k/v", 4096, 1024), ("gate/up", 4096, 12288), ("down", 12288, 4096)]
ROWS = [8192, 1, 8, 64]
DEV = "cuda"


# --- peer (b): the plain Triton GEMM ---------------------------------------------------------
@triton.jit
def plain_gemm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    group = GROUP_M * tiles_n
    first_m = (pid // group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    offs_m = (first_m + (pid % group) % rows) * BM + tl.arange(0, BM)
    offs_n = ((pid % group) // rows) * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m.to(tl.int64)[:, None] * sam + offs_k[None, :] * sak
    b_ptrs = b_ptr + offs_k[:, None] * sbk + offs_n.to(tl.int64)[None, :] * sbn
    in_m = (offs_m < M)[:, None]
    in_n = (offs_n < N)[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptrs, mask=in_m & (offs_k[None, :] < K - k0), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k0) & in_n, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    c = c_ptr + offs_m.to(tl.int64)[:, None] * scm + offs_n[None, :]
    tl.store(c, acc.to(tl.bfloat16), mask=in_m & in_n)


def plain_gemm_into(c, a, b):
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 256),)
    plain_gemm_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                            BM=128, BN=256, BK=64, GROUP_M=8, num_warps=8, num_stages=3)
    return c


def plain_gemm(a, b):
    return plain_gemm_into(torch.empty((a.shape[0], b.shape[1]), dtype=torch.bfloat16, device=DEV), a, b)


# --- helpers -----------------------------------------------------------------------------------
def bits_equal(x, y):
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    view = torch.int16 if x.dtype == torch.bfloat16 else torch.int32
    return bool(torch.equal(x.contiguous().view(view), y.contiguous().view(view)))


def mismatches(x, y):
    view = torch.int16 if x.dtype == torch.bfloat16 else torch.int32
    return int((x.contiguous().view(view) != y.contiguous().view(view)).sum().item())


def randn(*shape, seed):
    g = torch.Generator(device=DEV)
    g.manual_seed(seed)
    return torch.randn(shape, generator=g, device=DEV, dtype=torch.float32).to(torch.bfloat16)


def randint(lo, hi, shape, seed):
    g = torch.Generator(device=DEV)
    g.manual_seed(seed)
    return torch.randint(lo, hi + 1, shape, generator=g, device=DEV)


class Record(JsonRecord):
    def __init__(self, path):
        super().__init__(path, {"schema": "ws1-gemm-peers-v1", "environment": {}, "checks": {}, "rows": []})

    def check(self, name, result):
        self.data["checks"][name] = result
        print(f"check {name}: {'pass' if result.get('pass') else 'FAIL'} {json.dumps(result)}", flush=True)
        self.save()


def environment():
    p = torch.cuda.get_device_properties(0)
    return {"torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
            "gpu": torch.cuda.get_device_name(0), "sm_count": p.multi_processor_count,
            "capability": list(torch.cuda.get_device_capability(0)),
            "tf32_matmul": torch.backends.cuda.matmul.allow_tf32, "tf32_cudnn": torch.backends.cudnn.allow_tf32,
            "bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
            "timing": "triton.testing.do_bench median, L2 cleared before every run",
            "det_gemm_forward": dict(DG.FWD, BK=DG.BK), "det_gemm_backward": dict(DG.BWD, BK=DG.BK),
            "plain_tile": [128, 256, 64], "plain_warps_stages": [8, 3]}


def _compiled(k):
    if k is None:
        return None
    return {"n_regs": getattr(k, "n_regs", None), "n_spills": getattr(k, "n_spills", None),
            "shared": getattr(getattr(k, "metadata", None), "shared", None)}


def compile_info():
    """Registers and spills of the kernels as compiled for the M = 8192 q/o shape (ptxas's)."""
    M, K, N = 8192, 4096, 4096
    a, b, g = randn(M, K, seed=1), randn(K, N, seed=2), randn(M, N, seed=3)
    c = torch.empty((M, N), dtype=torch.bfloat16, device=DEV)
    da = torch.empty((M, K), dtype=torch.bfloat16, device=DEV)
    db = torch.empty((K, N), dtype=torch.bfloat16, device=DEV)
    out = {"det_gemm split": _compiled(DG.launch_gemm(c, a, b, 2, True)),
           "det_gemm k1": _compiled(DG.launch_gemm(c, a, b, 1, True)),
           "det_gemm backward da": _compiled(DG.launch_gemm(da, g, b.t(), 1, False)),
           "det_gemm backward db": _compiled(DG.launch_gemm(db, a.t(), g, 1, False, batch_rows=False))}
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 256),)
    k = plain_gemm_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                                BM=128, BN=256, BK=64, GROUP_M=8, num_warps=8, num_stages=3)
    out["plain"] = _compiled(k)
    return out


# --- checks ------------------------------------------------------------------------------------
def check_rows_m59(rec, shapes):
    out = {}
    ok = True
    for i, (name, K, N) in enumerate(shapes):
        a = randn(8192, K, seed=100 + i)
        b = randn(K, N, seed=200 + i)
        a59 = a[:59].contiguous()
        plain = bits_equal(plain_gemm(a, b)[:59], plain_gemm(a59, b))
        det = bits_equal(DG.forward_device(a, b, 2)[:59], DG.forward_device(a59, b, 2))
        g = randn(8192, N, seed=300 + i)
        da_full, _ = DG.backward_device(a, b, g)
        da59, _ = DG.backward_device(a59, b, g[:59].contiguous())
        da = bits_equal(da_full[:59], da59)
        out[name] = {"plain_triton_c": plain, "det_gemm_c": det, "det_gemm_da": da}
        ok = ok and plain and det and da
        del a, b, g, da_full
    rec.check("rows_m59", {"pass": ok, "shapes": out})


def check_context(rec):
    a = torch.randn(4, 8).to(torch.bfloat16)
    b = torch.randn(8, 3).to(torch.bfloat16)
    cases = {"k_shards 0": {"k_shards": 0}, "k_shards 2.5": {"k_shards": 2.5}, "k_shards '2'": {"k_shards": "2"},
             "k_shards true": {"k_shards": True}, "k_partial 1": {"k_partial": 1}}
    out, ok = {}, True
    for label, ctx in cases.items():
        try:
            DG.forward({"a": a, "b": b}, ctx)
            out[label] = "accepted"
            ok = False
        except S.OpInputError as e:
            msg = str(e)
            out[label] = msg
            field = label.split()[0]
            ok = ok and msg.startswith(f"det_gemm: {field}: ") and "\n" not in msg
    # absent keys and an old host's k_tree_leaf: accepted, bf16 out
    c = DG.forward({"a": a, "b": b}, {"k_tree_leaf": 32})["c"]
    out["absent + k_tree_leaf"] = str(c.dtype)
    ok = ok and c.dtype == torch.bfloat16
    rec.check("context", {"pass": ok, "cases": out})


def check_k_partial(rec, shapes):
    out, ok = {}, True
    # Through the module's forward(): CPU tensors, the op context, c as float32 under k_partial.
    M, K, N = 256, 4096, 1024
    a = randn(M, K, seed=11).cpu()
    b = randn(K, N, seed=12).cpu()
    c2 = DG.forward({"a": a, "b": b}, {"k_shards": 2, "k_partial": False, "k_tree_leaf": 32})["c"]
    h = K // 2
    p0 = DG.forward({"a": a[:, :h].contiguous(), "b": b[:h].contiguous()}, {"k_shards": 2, "k_partial": True})["c"]
    p1 = DG.forward({"a": a[:, h:].contiguous(), "b": b[h:].contiguous()}, {"k_partial": True})["c"]
    comb = (p0 + p1).to(torch.bfloat16)
    e = bits_equal(c2, comb) and p0.dtype == torch.float32 and c2.dtype == torch.bfloat16
    out["module forward M256 K4096 N1024"] = {"equal": e, "p0_dtype": str(p0.dtype), "c_dtype": str(c2.dtype),
                                               "mismatches": mismatches(c2, comb)}
    ok = ok and e
    # On the device, at the projection shapes (M 512) and ragged ones.
    cases = [(f"{name} M512", 512, K, N, 2) for name, K, N in shapes]
    # K 4097: the split and the last half by pointers (unaligned rows), the first half by TMA
    cases += [("odd K M300 K4099 N520", 300, 4099, 520, 2), ("mixed TMA/pointers M128 K4097 N256", 128, 4097, 256, 2),
              ("k_shards 3 M256 K4096 N1024", 256, 4096, 1024, 3),
              ("k_shards 3 M77 K1000 N130", 77, 1000, 130, 3)]
    for j, (label, M, K, N, t) in enumerate(cases):
        a = randn(M, K, seed=20 + j)
        b = randn(K, N, seed=40 + j)
        c = DG.forward_device(a, b, t)
        total = None
        for r in range(t):
            lo, hi = r * K // t, (r + 1) * K // t
            p = DG.forward_device(a[:, lo:hi].contiguous(), b[lo:hi].contiguous(), partial=True)
            total = p if total is None else total + p
        comb = total.to(torch.bfloat16)
        e = bits_equal(c, comb)
        out[label] = {"equal": e, "mismatches": mismatches(c, comb)}
        ok = ok and e
    rec.check("k_partial", {"pass": ok, "cases": out})


def probe_operands(M, R, N, seed):
    """x [M,R], y [R,N] bf16 small integers and the exact x @ y (|.| <= 45): the first half of R
    sums to odd integers above 256 (a[:,0] = b[0,:] = 1, the other products even), the second
    half is (-x, y) of the first but for its last k, whose x adds d in [-3, 3]."""
    h = R // 2
    x1 = 2 * randint(1, 7, (M, h), seed)            # even, 2..14
    x1[:, 0] = 1
    x1[:, h - 1] = 2 * randint(1, 6, (M,), seed + 1)  # even, 2..12
    y1 = randint(1, 15, (h, N), seed + 2)
    y1[0, :] = 1
    d = randint(-3, 3, (M,), seed + 3)
    x2 = -x1.clone()
    x2[:, h - 1] += d                                 # -15..1
    x = torch.cat([x1, x2], 1)
    y = torch.cat([y1, y1], 0)
    assert int(x.abs().max()) <= 15 and int(y.abs().max()) <= 15
    exact = d[:, None] * y1[h - 1][None, :]           # the remainder, |.| <= 45
    p0 = x1.double() @ y1.double()
    p0_bf16 = p0.float().to(torch.bfloat16).double()
    info = {"p0_min": float(p0.min()), "p0_all_odd": bool((p0.remainder(2) == 1).all()),
            "p0_not_bf16": float((p0_bf16 != p0).double().mean()), "c_max_abs": float(exact.abs().max()),
            "c_nonzero": float((exact != 0).double().mean())}
    return x.to(torch.bfloat16), y.to(torch.bfloat16), exact.to(torch.bfloat16), info


def check_cancellation(rec):
    M, R, N = 256, 4096, 256
    x, y, exact, info = probe_operands(M, R, N, 7)
    out = {"operands": info}
    ok = info["p0_all_odd"] and info["p0_not_bf16"] == 1.0
    results = {"cublas": torch.matmul(x, y), "plain_triton": plain_gemm(x, y),
               "det_gemm_k1": DG.forward_device(x, y, 1), "det_gemm_k2": DG.forward_device(x, y, 2)}
    h = R // 2
    p0 = DG.forward_device(x[:, :h].contiguous(), y[:h].contiguous(), partial=True)
    p1 = DG.forward_device(x[:, h:].contiguous(), y[h:].contiguous(), partial=True)
    results["det_gemm_partials"] = (p0 + p1).to(torch.bfloat16)
    # the backward: da = dy @ b^T with dy = x, b = y^T; db = a^T @ dy with a = x^T, dy = y
    da, _ = DG.backward_device(randn(M, N, seed=5), y.t().contiguous(), x)
    _, db = DG.backward_device(x.t().contiguous(), randn(M, N, seed=6), y)
    results["det_gemm_da"] = da
    results["det_gemm_db"] = db
    for name, c in results.items():
        e = bits_equal(c, exact)
        out[name] = {"exact": e, "mismatches": mismatches(c, exact)}
        ok = ok and e
    rec.check("cancellation", {"pass": ok, "shape": [M, R, N], **out})


def check_accuracy(rec):
    out, ok = {}, True
    for j, (M, K, N) in enumerate([(300, 4099, 520), (64, 12288, 4096), (129, 1000, 257)]):
        a = randn(M, K, seed=60 + j)
        b = randn(K, N, seed=70 + j)
        g = randn(M, N, seed=80 + j)
        refs = {"c": a.float() @ b.float(), "da": g.float() @ b.float().t(), "db": a.float().t() @ g.float()}
        da, db = DG.backward_device(a, b, g)
        got = {"c_k1": (DG.forward_device(a, b, 1), "c"), "c_k2": (DG.forward_device(a, b, 2), "c"),
               "da": (da, "da"), "db": (db, "db")}
        row = {}
        for name, (x, ref) in got.items():
            r = refs[ref]
            err = float((x.float() - r).abs().max() / r.abs().max())
            finite = bool(torch.isfinite(x.float()).all())
            row[name] = err
            ok = ok and finite and err < 2 ** -8
        out[f"M{M} K{K} N{N}"] = row
    rec.check("accuracy", {"pass": ok, "bound": 2 ** -8, "max_err_over_max_ref": out})


# --- timing ------------------------------------------------------------------------------------
def bench(fn):
    fn()
    torch.cuda.synchronize()
    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def time_shape(rec, name, M, K, N, seed):
    a = randn(M, K, seed=seed)
    b = randn(K, N, seed=seed + 1)
    g = randn(M, N, seed=seed + 2)
    c = torch.empty((M, N), dtype=torch.bfloat16, device=DEV)
    da = torch.empty((M, K), dtype=torch.bfloat16, device=DEV)
    db = torch.empty((K, N), dtype=torch.bfloat16, device=DEV)
    bt, at = b.t(), a.t()
    fns = {
        ("forward", "cublas"): lambda: torch.matmul(a, b, out=c),
        ("forward", "triton"): lambda: plain_gemm_into(c, a, b),
        ("forward", "det_gemm"): lambda: DG.gemm_into(c, a, b, 2, True),
        ("forward", "det_gemm_k1"): lambda: DG.gemm_into(c, a, b, 1, True),
        ("backward", "cublas"): lambda: (torch.matmul(g, bt, out=da), torch.matmul(at, g, out=db)),
        ("backward", "triton"): lambda: (plain_gemm_into(da, g, bt), plain_gemm_into(db, at, g)),
        ("backward", "det_gemm"): lambda: (DG.gemm_into(da, g, bt, 1, False),
                                           DG.gemm_into(db, at, g, 1, False, batch_rows=False)),
    }
    base = {}
    for (direction, peer), fn in fns.items():
        ms = bench(fn)
        flops = (2 if direction == "forward" else 4) * M * N * K
        if peer == "cublas":
            base[direction] = ms
        row = {"shape": name, "M": M, "K": K, "N": N, "direction": direction, "peer": peer, "ms": ms,
               "tflops": flops / (ms * 1e-3) / 1e12, "ratio_to_cublas": base[direction] / ms}
        rec.data["rows"].append(row)
    rec.save()
    del a, b, g, c, da, db


# --- the configuration sweep (--sweep) ---------------------------------------------------------
SWEEP = [  # (direction, the config tried in DG.FWD or DG.BWD)
    ("backward", {"BM": 128, "BN": 128, "warps": 8, "stages": 4, "tma": True, "scratch": False}),
    ("backward", {"BM": 128, "BN": 256, "warps": 8, "stages": 4, "tma": True, "scratch": False}),
    ("forward", {"BM": 128, "BN": 128, "warps": 8, "stages": 5, "tma": True, "scratch": False}),
]


class SubRecord:
    """A Record's view that files checks under one sweep entry."""
    def __init__(self, rec, entry):
        self.rec, self.entry = rec, entry

    def check(self, name, result):
        self.entry.setdefault("checks", {})[name] = result
        print(f"  sweep check {name}: {'pass' if result.get('pass') else 'FAIL'}", flush=True)
        self.rec.save()


def run_sweep(rec, t_end):
    base = {(r["shape"], r["direction"]): r["ms"] for r in rec.data["rows"] if r["peer"] == "cublas" and r["M"] == 8192}
    default = {"forward": dict(DG.FWD), "backward": dict(DG.BWD)}
    rec.data["sweep"] = []
    M = 8192
    for direction, cfg in SWEEP:
        if time.time() > t_end:
            break
        entry = {"direction": direction, "config": cfg, "rows": []}
        rec.data["sweep"].append(entry)
        if direction == "forward":
            DG.FWD = dict(cfg)
        else:
            DG.BWD = dict(cfg)
        try:
            for i, (name, K, N) in enumerate(SHAPES):
                a = randn(M, K, seed=1000 + 10 * i)
                b = randn(K, N, seed=1001 + 10 * i)
                g = randn(M, N, seed=1002 + 10 * i)
                c = torch.empty((M, N), dtype=torch.bfloat16, device=DEV)
                da = torch.empty((M, K), dtype=torch.bfloat16, device=DEV)
                db = torch.empty((K, N), dtype=torch.bfloat16, device=DEV)
                if direction == "forward":
                    if i == 0:
                        entry["compiled"] = {"split": _compiled(DG.launch_gemm(c, a, b, 2, True)),
                                             "k1": _compiled(DG.launch_gemm(c, a, b, 1, True))}
                    fn = lambda: DG.gemm_into(c, a, b, 2, True)  # noqa: E731
                else:
                    if i == 0:
                        entry["compiled"] = {
                            "da": _compiled(DG.launch_gemm(da, g, b.t(), 1, False)),
                            "db": _compiled(DG.launch_gemm(db, a.t(), g, 1, False, batch_rows=False))}
                    fn = lambda: (DG.gemm_into(da, g, b.t(), 1, False),  # noqa: E731
                                  DG.gemm_into(db, a.t(), g, 1, False, batch_rows=False))
                ms = bench(fn)
                flops = (2 if direction == "forward" else 4) * M * N * K
                entry["rows"].append({"shape": name, "ms": ms, "tflops": flops / (ms * 1e-3) / 1e12,
                                      "ratio_to_cublas": base.get((name, direction), float("nan")) / ms})
                del a, b, g, c, da, db
                torch.cuda.empty_cache()
            print(f"sweep {direction} {json.dumps(cfg)}: compiled {json.dumps(entry.get('compiled'))}; "
                  + ", ".join(f"{r['shape']} {r['ms']:.4f} ms {r['ratio_to_cublas']:.3f}x" for r in entry["rows"]),
                  flush=True)
        except Exception as e:
            entry["error"] = f"{type(e).__name__}: {e}"
            print(f"sweep {direction} {json.dumps(cfg)}: {entry['error'][:2000]}", flush=True)
        finally:
            DG.FWD, DG.BWD = dict(default["forward"]), dict(default["backward"])
        rec.save()
    # the identities under each config that ran (as time allows)
    for entry in rec.data["sweep"]:
        if time.time() > t_end or "error" in entry:
            continue
        if entry["direction"] == "forward":
            DG.FWD = dict(entry["config"])
        else:
            DG.BWD = dict(entry["config"])
        sub = SubRecord(rec, entry)
        print(f"sweep checks {entry['direction']} {json.dumps(entry['config'])}", flush=True)
        try:
            for fn in ((check_k_partial, check_rows_m59) if entry["direction"] == "forward"
                       else (check_rows_m59,)):
                fn(sub, SHAPES)
            check_cancellation(sub)
            check_accuracy(sub)
        except Exception as e:
            entry["checks_error"] = f"{type(e).__name__}: {e}"
        finally:
            DG.FWD, DG.BWD = dict(default["forward"]), dict(default["backward"])
        rec.save()


def table(rows):
    lines = [f"{'shape':8} {'M':>5} {'dir':8} {'peer':12} {'ms':>9} {'TFLOP/s':>8} {'x cuBLAS':>8}"]
    for r in rows:
        lines.append(f"{r['shape']:8} {r['M']:>5} {r['direction']:8} {r['peer']:12} {r['ms']:9.4f} "
                     f"{r['tflops']:8.1f} {r['ratio_to_cublas']:8.3f}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the JSON record")
    ap.add_argument("--quick", action="store_true", help="the checks and M = 8192 only")
    ap.add_argument("--no-timing", action="store_true", help="the checks only")
    ap.add_argument("--sweep", type=float, default=0.0,
                    help="after the rest, try the SWEEP configs at M = 8192 for up to this many seconds")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rec = Record(args.out)
    rec.data["environment"] = environment()
    rec.save()
    try:
        rec.data["compiled"] = compile_info()
    except Exception as e:
        rec.data["compiled"] = {"error": f"{type(e).__name__}: {e}"}
    print(f"compiled: {json.dumps(rec.data['compiled'])}", flush=True)
    rec.save()
    t0 = time.time()
    for fn in (check_context, check_accuracy, check_cancellation):
        try:
            fn(rec)
        except Exception as e:  # a broken check is recorded, and the rest still run
            rec.check(fn.__name__[6:], {"pass": False, "error": f"{type(e).__name__}: {e}"})
    for fn in (check_k_partial, check_rows_m59):
        try:
            fn(rec, SHAPES)
        except Exception as e:
            rec.check(fn.__name__[6:], {"pass": False, "error": f"{type(e).__name__}: {e}"})
    rec.data["checks_s"] = time.time() - t0
    torch.cuda.empty_cache()
    if not args.no_timing:
        rows = [8192] if args.quick else ROWS
        for M in rows:
            for i, (name, K, N) in enumerate(SHAPES):
                try:
                    time_shape(rec, name, M, K, N, 1000 + 10 * i)
                except Exception as e:
                    rec.data.setdefault("errors", []).append(f"{name} M{M}: {type(e).__name__}: {e}")
                    print(f"timing {name} M{M}: {type(e).__name__}: {e}", flush=True)
                torch.cuda.empty_cache()
            print(f"timed M={M} at {time.time() - t0:.1f}s", flush=True)
    if args.sweep > 0 and not args.no_timing:
        run_sweep(rec, time.time() + args.sweep)
    rec.data["total_s"] = time.time() - t0
    checks = rec.data["checks"]
    rec.data["all_checks_pass"] = all(c.get("pass") for c in checks.values())
    rec.save()
    print("checks: " + ", ".join(f"{k} {'pass' if v.get('pass') else 'FAIL'}" for k, v in checks.items()))
    print(table(rec.data["rows"]))
    return 0 if rec.data["all_checks_pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
