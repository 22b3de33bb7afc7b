#!/usr/bin/env python3
"""attention's peers on the GPU, at the shapes `ws1check bench --op attention` times.

Usage (on the GPU machine, from the repository root; torch and triton installed, nothing of the
project built): python3 tools/bench/peers.py --out PATH.json [--peers a,b] [--rep MS], then
ws1check bench --op attention --peers PATH.json on the same machine in the same call (a ratio
holds for one GPU and one run; tools/device/h200_run.sh's step `peers` runs both).

Rows (bf16, causal, 32 query / 8 kv heads, head_dim 128, layout [B, H, S, D]; the variant
strings are the bench's, cli/bench_peers.hpp's attention_peer_variant):
  causal S=8192, causal S=4096  one sequence, Sq = Skv = S: fwd, bwd, fwd+bwd;
  decode B=32 Skv=4096          32 sequences of one query against 4096 cached keys: fwd
                                (is_causal False: one query sees every key, as the bottom-right
                                causal mask of ws1check's attention has it).
Peers (a user's other picks, ../shared/DESIGN.md §11):
  cudnn_sdpa      F.scaled_dot_product_attention under sdpa_kernel(SDPBackend.CUDNN_ATTENTION);
  flash_sdpa      the same under SDPBackend.FLASH_ATTENTION;
  flash_attn      the flash_attn package's flash_attn_func (its layout [B, S, H, D], made outside
                  the timing; GQA native), only where the package imports;
  flex_attention  torch.compile'd flex_attention with a causal block mask (§11's torch.compile
                  peer: compiling F.scaled_dot_product_attention only calls the kernels above).
  §11's cuBLAS and fixed-config Triton GEMM peers time GEMMs; no row here is one.
GQA: SDPA's enable_gqa=True where torch has it, else k and v repeat_interleave'd to 32 heads
inside the timed call (what a user of such a torch pays), as also where a backend refuses
enable_gqa; environment.gqa says what torch has, each row's "gqa" what the peer ran.
Directions: fwd, the forward on inputs that need no grad; bwd, the backward alone:
torch.autograd.grad of the output on a forward graph made once and retained (no forward in the
timing, no gradient accumulation); fwd+bwd, the forward and that grad call.
Flops, as ws1check's attention work(): 4 * D * Hq per visible (query, key) pair forward, 10
backward, 14 fwd+bwd; visible pairs S (S + 1) / 2 per causal sequence, Skv per decode query.
Data: random normal bf16 (never zeros), seeded. Timing: triton.testing.do_bench, the median,
which clears the L2 (writes a 256 MB buffer) before every run; TF32 off.
Check, one line per row: max |x - FP32 reference| of o (fwd), of dq, dk, dv (bwd), of all four
(fwd+bwd), recorded as max_abs_err beside max_abs_ref; the reference is the definition in FP32
(scores, the causal mask, softmax, P V; autograd for the gradients), one kv head at a time.
"suspect" marks an error above max_abs_ref / 16 or not finite: a broken peer.
A peer that raises on a row, or does not import, is recorded with its error and no time; the
rest still run.
Output: --out PATH (JSON, schema ws1-peers-v1: environment, rows), rewritten after every row; a
short table on stdout, last.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time
from contextlib import nullcontext

import torch
import torch.nn.functional as F

import triton
import triton.testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from json_record import JsonRecord  # noqa: E402

HQ, HKV, D = 32, 8, 128
# (variant, B, Sq, Skv, directions): the bench's kAttentionPeerShapes
VARIANTS = [("causal S=8192", 1, 8192, 8192, ("fwd", "bwd", "fwd+bwd")),
            ("causal S=4096", 1, 4096, 4096, ("fwd", "bwd", "fwd+bwd")),
            ("decode B=32 Skv=4096", 32, 1, 4096, ("fwd",))]
PEERS = ["cudnn_sdpa", "flash_sdpa", "flash_attn", "flex_attention"]
FLOPS_PER_PAIR = {"fwd": 4, "bwd": 10, "fwd+bwd": 14}
DEV = "cuda"


def randn(*shape, seed):
    g = torch.Generator(device=DEV)
    g.manual_seed(seed)
    return torch.randn(shape, generator=g, device=DEV, dtype=torch.float32).to(torch.bfloat16)


def visible_pairs(b, sq, skv):
    # key j visible to query i iff j <= i + (skv - sq): skv - sq + i + 1 keys for query i
    return b * (sq * (skv - sq) + sq * (sq + 1) // 2)


def short(e):
    text = f"{type(e).__name__}: {e}".strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


class Record(JsonRecord):
    def __init__(self, path):
        super().__init__(path, {"schema": "ws1-peers-v1", "environment": {}, "rows": []})

    def row(self, row):
        self.data["rows"].append(row)
        self.save()


# --- GQA and the peers -------------------------------------------------------------------------
def gqa_mode():
    q = torch.zeros(1, 4, 2, 8, device=DEV, dtype=torch.bfloat16)
    kv = torch.zeros(1, 2, 2, 8, device=DEV, dtype=torch.bfloat16)
    try:
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
        return "enable_gqa"
    except TypeError:
        return "repeat_interleave"


GQA = None  # set in main()


def sdpa_peer(backend_name):
    """(context, attn, info) for an SDPA backend: attn(q, k, v, causal) on [B, H, S, D]; info
    goes into each row (info["gqa"]: how GQA was had)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = getattr(SDPBackend, backend_name)
    info = {"gqa": GQA}

    def attn(q, k, v, causal):
        if info["gqa"] == "enable_gqa":
            try:
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
            except RuntimeError:
                # A backend that refuses GQA: a user expands k and v, and pays for it. The first
                # (untimed) call settles this; info records it.
                info["gqa"] = "repeat_interleave (enable_gqa refused)"
        g = q.shape[1] // k.shape[1]
        return F.scaled_dot_product_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1),
                                              is_causal=causal)
    # The backend is chosen at the forward; the backward follows it (the context wraps the whole
    # timing, so no Python context switch is timed).
    return (lambda: sdpa_kernel(backend)), attn, info


def flash_attn_peer():
    from flash_attn import flash_attn_func

    def attn(q, k, v, causal):
        # q, k, v already [B, S, H, D] (to_layout): the package's own layout
        return flash_attn_func(q, k, v, causal=causal)
    return None, attn, {"gqa": "native"}


def flex_peer():
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    compiled = torch.compile(flex_attention, dynamic=False)
    masks = {}

    def causal_mask(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def attn(q, k, v, causal):
        sq, skv = q.shape[2], k.shape[2]
        mask = None
        if causal:
            if (sq, skv) not in masks:
                masks[(sq, skv)] = create_block_mask(causal_mask, B=None, H=None, Q_LEN=sq, KV_LEN=skv, device=DEV)
            mask = masks[(sq, skv)]
        return compiled(q, k, v, block_mask=mask, enable_gqa=True)
    return None, attn, {"gqa": "enable_gqa"}


def make_peer(name):
    if name == "cudnn_sdpa":
        return sdpa_peer("CUDNN_ATTENTION")
    if name == "flash_sdpa":
        return sdpa_peer("FLASH_ATTENTION")
    if name == "flash_attn":
        return flash_attn_peer()
    if name == "flex_attention":
        return flex_peer()
    raise ValueError(name)


def to_layout(peer, t):
    """[B, H, S, D] as the peer takes it (flash_attn: [B, S, H, D], contiguous)."""
    return t.transpose(1, 2).contiguous() if peer == "flash_attn" else t


def from_layout(peer, t):
    return t.transpose(1, 2) if peer == "flash_attn" else t


# --- the FP32 reference ------------------------------------------------------------------------
def reference(q, k, v, dy, grads):
    """o (and dq, dk, dv when `grads`) in FP32 from the definition, one kv head at a time."""
    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    g = hq // hkv
    visible = torch.ones(sq, skv, dtype=torch.bool, device=DEV).tril(diagonal=skv - sq)
    out = {"o": torch.empty(q.shape, dtype=torch.float32, device=DEV)}
    if grads:
        out.update(dq=torch.empty(q.shape, dtype=torch.float32, device=DEV),
                   dk=torch.empty(k.shape, dtype=torch.float32, device=DEV),
                   dv=torch.empty(v.shape, dtype=torch.float32, device=DEV))
    for h in range(hkv):
        heads = slice(h * g, (h + 1) * g)
        qh = q[:, heads].float().requires_grad_(grads)
        kh = k[:, h:h + 1].float().requires_grad_(grads)  # broadcast over the group's query heads
        vh = v[:, h:h + 1].float().requires_grad_(grads)
        with torch.enable_grad() if grads else torch.no_grad():
            s = (qh @ kh.transpose(-1, -2)) * (1.0 / math.sqrt(d))
            p = torch.softmax(s.masked_fill(~visible, float("-inf")), dim=-1)
            o = p @ vh
            out["o"][:, heads] = o.detach()
            if grads:
                dq, dk, dv = torch.autograd.grad(o, (qh, kh, vh), dy[:, heads].float())
                out["dq"][:, heads] = dq
                out["dk"][:, h:h + 1] = dk
                out["dv"][:, h:h + 1] = dv
        del s, p, o
    return out


def check(got, ref):
    errs = {n: float((x.float() - ref[n]).abs().max()) for n, x in got.items()}
    refs = {n: float(ref[n].abs().max()) for n in got}
    err, big = max(errs.values()), max(refs.values())
    suspect = not all(math.isfinite(e) for e in errs.values()) or err > big / 16
    return {"max_abs_err": err, "max_abs_ref": big, "max_abs_err_by_tensor": errs, "suspect": suspect}


# --- timing ------------------------------------------------------------------------------------
def bench(fn, rep):
    fn()
    torch.cuda.synchronize()
    return float(triton.testing.do_bench(fn, warmup=25, rep=rep, return_mode="median"))


def time_variant(rec, peer, variant, b, sq, skv, directions, ref, inputs, rep):
    causal = sq > 1
    base = {"op": "attention", "variant": variant, "peer": peer}
    try:
        context, attn, info = make_peer(peer)
    except Exception as e:  # the package or the API is absent: every row says so
        for direction in directions:
            rec.row(dict(base, direction=direction, error=f"not run: {peer} is not available ({short(e)})"))
            print(f"{variant} {direction} {peer}: not run ({short(e)})", flush=True)
        return
    q, k, v, dy = (to_layout(peer, t) for t in inputs)
    with (context() if context else nullcontext()):
        for direction in directions:
            row = dict(base, direction=direction)
            try:
                if direction == "fwd":
                    with torch.no_grad():
                        o = attn(q, k, v, causal)
                        row.update(check({"o": from_layout(peer, o)}, ref))
                        ms = bench(lambda: attn(q, k, v, causal), rep)
                else:
                    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
                    if direction == "bwd":
                        o = attn(qg, kg, vg, causal)
                        dq, dk, dv = torch.autograd.grad(o, (qg, kg, vg), dy, retain_graph=True)
                        got = {}
                        fn = lambda: torch.autograd.grad(o, (qg, kg, vg), dy, retain_graph=True)  # noqa: E731
                    else:
                        o = attn(qg, kg, vg, causal)
                        dq, dk, dv = torch.autograd.grad(o, (qg, kg, vg), dy)
                        got = {"o": from_layout(peer, o.detach())}
                        fn = lambda: torch.autograd.grad(attn(qg, kg, vg, causal), (qg, kg, vg), dy)  # noqa: E731
                    got.update(dq=from_layout(peer, dq), dk=from_layout(peer, dk), dv=from_layout(peer, dv))
                    row.update(check(got, ref))
                    del dq, dk, dv, got
                    ms = bench(fn, rep)
                    del o, fn, qg, kg, vg
                row.update(info)
                row["median_ms"] = ms
                row["tflops"] = FLOPS_PER_PAIR[direction] * D * HQ * visible_pairs(b, sq, skv) / (ms * 1e-3) / 1e12
                print(f"check {variant} {direction} {peer}: max |x - fp32| {row['max_abs_err']:.3e} "
                      f"(max |fp32| {row['max_abs_ref']:.3e}){' SUSPECT' if row['suspect'] else ''}; "
                      f"{ms:.4f} ms", flush=True)
            except Exception as e:  # a peer that raises on a shape is recorded, not fatal
                row = dict(base, direction=direction, error=short(e))
                print(f"{variant} {direction} {peer}: {short(e)}", flush=True)
            rec.row(row)
            torch.cuda.empty_cache()


def environment():
    p = torch.cuda.get_device_properties(0)
    env = {"torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "gpu": torch.cuda.get_device_name(0),
           "sm_count": p.multi_processor_count, "capability": list(torch.cuda.get_device_capability(0)),
           "tf32_matmul": torch.backends.cuda.matmul.allow_tf32, "tf32_cudnn": torch.backends.cudnn.allow_tf32,
           "gqa": GQA, "timing": "triton.testing.do_bench median, L2 cleared before every run",
           "fwd": "forward on inputs that need no grad",
           "bwd": "torch.autograd.grad on a retained forward graph (the backward alone)",
           "fwd+bwd": "forward, then torch.autograd.grad"}
    try:
        env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
    except Exception:
        pass
    try:
        import flash_attn
        env["flash_attn"] = flash_attn.__version__
    except Exception as e:
        env["flash_attn"] = f"not importable ({short(e)})"
    return env


def table(rows):
    lines = [f"{'variant':22} {'dir':8} {'peer':15} {'ms':>9} {'TFLOP/s':>8} {'max err':>9}"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['variant']:22} {r['direction']:8} {r['peer']:15} {r['error'][:60]}")
        else:
            lines.append(f"{r['variant']:22} {r['direction']:8} {r['peer']:15} {r['median_ms']:9.4f} "
                         f"{r['tflops']:8.1f} {r['max_abs_err']:9.2e}{' SUSPECT' if r['suspect'] else ''}")
    return "\n".join(lines)


def main():
    global GQA
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the JSON record (ws1-peers-v1)")
    ap.add_argument("--peers", default=",".join(PEERS), help="comma-separated subset of " + ", ".join(PEERS))
    ap.add_argument("--rep", type=float, default=500.0, help="do_bench's rep: ms of timed runs per row")
    args = ap.parse_args()
    peers = [p for p in args.peers.split(",") if p]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        ap.error(f"--peers: unknown {', '.join(unknown)} (known: {', '.join(PEERS)})")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    GQA = gqa_mode()
    rec = Record(args.out)
    rec.data["environment"] = environment()
    rec.save()
    t0 = time.time()
    for i, (variant, b, sq, skv, directions) in enumerate(VARIANTS):
        seed = 20261217 + 10 * i
        inputs = (randn(b, HQ, sq, D, seed=seed), randn(b, HKV, skv, D, seed=seed + 1),
                  randn(b, HKV, skv, D, seed=seed + 2), randn(b, HQ, sq, D, seed=seed + 3))
        ref = reference(*inputs, grads=directions != ("fwd",))
        torch.cuda.empty_cache()
        for peer in peers:
            time_variant(rec, peer, variant, b, sq, skv, directions, ref, inputs, args.rep)
        del inputs, ref
        torch.cuda.empty_cache()
        print(f"timed {variant} at {time.time() - t0:.1f}s", flush=True)
    rec.data["total_s"] = time.time() - t0
    rec.save()
    print(table(rec.data["rows"]))
    # Failed peers are results; only a run where nothing could be timed is a failure.
    return 0 if any("error" not in r for r in rec.data["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
