"""attention on triton_cuda_bf16: causal GQA scaled dot-product attention, forward and backward.

The op's contract is the cpu_bf16 / cuda_bf16 one (lib/ops/attention.cpp, cuda/ops/attention.cu):
q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D] bf16, optional key_mask [B, Skv] bool (true = valid
key), backward also dy.o (q's shape). Query head h reads kv head h / (Hq / Hkv);
scale = float32(1 / sqrt(D)); key j is visible to query i iff key_mask[b, j] and
j <= i + (Skv - Sq) (causal mask aligned bottom-right: prefill, decode Sq = 1 against a cache,
chunked prefill). Forward returns o (bf16); backward dq, dk, dv (bf16). A row without a visible
key gives o = 0 and no gradient contribution; masked-out keys get dk = dv = 0.

Algorithm and reduction orders (mirroring cuda/ops/attention.cu kernel for kernel):
- Key order: the keys of a batch row are its VALID keys in index order, cut into tiles of 64 by
  rank (tile t = valid keys of rank [64t, 64t + 64)). attention_prep_keys builds that list
  (kidx), a running count of valid keys (cnt) and nvalid; attention_prep_vis gives every query
  row the number of valid keys it sees (vis, always a prefix of the list) and q0, the batch row's
  first query that sees any key. The tile boundaries depend neither on Sq, nor on padding, nor
  on the batch, so a decode row, the same row in a prefill or a chunked prefill, and the same
  row under left or right padding run the same arithmetic. Invisible keys of a tile get
  probability exactly 0 (a select); rows past a tensor's end are loaded as zeros.
- attention_fwd, one program per (b, h, 64 query rows), heaviest query tiles first. Per key
  tile in order: S = Q K^T (tl.dot, bf16 operands, FP32 accumulate); x = S * scale, masked;
  m_new = max(m, tile max), alpha = exp(m - m_new), p = exp(x - m_new) (FP32, libdevice expf);
  l = fma(l, alpha, tile_sum); acc = acc * alpha, then acc += P V with P fed as a bf16 hi + lo
  pair (hi = bf16(p), lo = bf16(p - hi): o cancels where V changes sign, one bf16 rounding of P
  is not enough), all hi k-steps then all lo k-steps into the same FP32 accumulator. A row with
  no visible key in a tile keeps m, l exactly (alpha = 1, p = 0). o = acc / l (IEEE division)
  rounded to bf16 once. In backward mode the same kernel writes LSE = m + log(l) (+inf for a
  row without keys) and Dsum = dO . o (FP32 o) instead of o.
- attention_dq, one program per (b, h, 64 query rows): per key tile in order S = Q K^T and
  dP = dO V^T by tl.dot, P = exp(S * scale - LSE), dS = P (dP - Dsum) (FP32), dq += dS K with
  dS as a bf16 hi + lo pair (a row of dS sums to ~0, so dS K is a small result of cancelling
  terms; ~16 significand bits are needed); dq * scale rounded to bf16 once.
- attention_dkdv, one program per (b, kv head, key tile): for each query head of the group in
  head order, for each 64-row query tile in order, counted from q0 (so a left-padded grid puts
  the same queries into the same MMA k-steps as the unpadded run; pad rows with dy = 0 add exact
  zeros): S^T = K Q^T, dP^T = V dO^T, P, dS as above; dk += dS^T Q and dv += P^T dO, both with
  the left operand as a bf16 hi + lo pair (as cuda_bf16: with P as one bf16, dv left the
  contract row at 8192 tokens, because dO changes sign and P^T dO cancels). dk * scale and dv rounded once, scattered back to the keys' positions.
Every tl.dot pins input_precision="ieee" (its operands are bf16 here, so it runs on the tensor
cores with FP32 accumulation; no TF32 anywhere). The FP32 elementwise math is compiled with
enable_fp_fusion=False (each mul/add rounds once, as the cuda code's __fmul_rn/__fsub_rn; the
one intended fma is tl.fma) and enable_reflect_ftz=False (libdevice keeps subnormals, as nvcc's
expf/logf). bf16 splits round through the bit pattern, because Triton may fold an
f32 -> bf16 -> f32 round trip away and the lo part would silently become 0.

Determinism and batch invariance: no atomics. Every sum has one order fixed by the row's own
key tiles (forward, dq: the row's bits do not depend on which other rows share its program,
since rows are independent in the MMA M dimension and per-row reductions run over the same
64-key tile layout) or by the queries counted from q0 (dk, dv). Integer arguments are not
specialised (do_not_specialize), so Sq = 1 and Sq = 64 run the same compiled kernel; the
launch configuration depends on the head dim only.

Bits against cuda_bf16: NOT equal (different MMA k-step grouping of the hi/lo pair, Triton's
reduction trees); same tiles, same online-softmax steps, same masking rule.
"""
import math
import os
import sys

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _support as S  # noqa: E402

OP = "attention"
TILE = 64  # keys per tile (= the CPU's and cuda's kTile) and query rows per program
MAX_HEAD_DIM = 256
PREP_BLOCK = 1024


# ---- device helpers -----------------------------------------------------------------------------

@triton.jit
def _split_bf16(x):
    """hi = bf16(x) (round to nearest even), lo = bf16(x - hi); hi + lo = x to ~16 significand
    bits. The rounding goes through the bits so the compiler cannot fold the round trip; lo is 0
    where hi is not finite (an overflow must not turn hi + lo into inf - inf)."""
    bits = x.to(tl.int32, bitcast=True)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & -65536).to(tl.float32, bitcast=True)
    hi = tl.where(x != x, x, rounded)
    lo = tl.where(tl.abs(hi) < float("inf"), x - hi, 0.0)
    return hi.to(tl.bfloat16), lo.to(tl.bfloat16)


@triton.jit
def _probs_and_grads(s, dp, seen, scale, lse, dsum):
    """P = exp(s * scale - LSE) and dS = P (dP - Dsum), exactly 0 where not seen."""
    p = tl.where(seen, libdevice.exp(s * scale - lse), 0.0)
    ds = tl.where(seen, p * (dp - dsum), 0.0)
    return p, ds


@triton.jit
def _query_tile(bh, rows, row_in, sq, cols, col_in, HEAD_DIM: tl.constexpr):
    """Query rows `rows` of head bh: their index in the [B * Hq * Sq] vectors (LSE, Dsum), and the
    element offsets and mask of their [rows, DP] tile in the head-major q / dO / o tensors."""
    head_rows = bh.to(tl.int64) * sq + rows
    tile_at = head_rows[:, None] * HEAD_DIM + cols[None, :]
    tile_mask = row_in[:, None] & col_in[None, :]
    return head_rows, tile_at, tile_mask


@triton.jit
def _backward_rows(q_ptr, dy_ptr, lse_ptr, dsum_ptr, head_rows, tile_at, tile_mask, row_in):
    """The backward's per-query-tile inputs: q and dO (bf16) and LSE, Dsum (FP32). Rows past the
    end read q = dO = 0, LSE = +inf (so P = 0) and Dsum = 0."""
    q = tl.load(q_ptr + tile_at, mask=tile_mask, other=0.0)
    dy = tl.load(dy_ptr + tile_at, mask=tile_mask, other=0.0)
    lse = tl.load(lse_ptr + head_rows, mask=row_in, other=float("inf"))
    dsum = tl.load(dsum_ptr + head_rows, mask=row_in, other=0.0)
    return q, dy, lse, dsum


@triton.jit
def _key_tile(kidx_row, kv_base, first, nvalid, cols, col_in, HEAD_DIM: tl.constexpr, TILE: tl.constexpr):
    """The key tile of ranks [first, first + TILE) in the batch row's valid-key list (kidx_row):
    the ranks, and the element offsets (kv_base: the kv head's first element) and mask of those
    keys' [keys, DP] tile in k / v; ranks past nvalid are masked off (load zeros)."""
    ranks = first + tl.arange(0, TILE)
    key_in = ranks < nvalid
    pos = tl.load(kidx_row + ranks, mask=key_in, other=0).to(tl.int64)
    kv_at = kv_base + pos[:, None] * HEAD_DIM + cols[None, :]
    kv_mask = key_in[:, None] & col_in[None, :]
    return ranks, kv_at, kv_mask


@triton.jit
def _query_program(pid, vis_ptr, nvalid_ptr, kidx_ptr, hq, hkv, sq, skv, group, heads,
                   HEAD_DIM: tl.constexpr, DP: tl.constexpr, TILE: tl.constexpr):
    """What program pid of attention_fwd / attention_dq covers, (b, h, TILE query rows) with the
    heaviest query tiles first: the rows' mask, the head-dim columns and their mask, the valid
    keys each row sees (count), the key tiles to walk (n_tiles), the batch row's nvalid and
    valid-key list, the kv head's first element, and the query tile (_query_tile)."""
    qtiles = tl.cdiv(sq, TILE)
    bh = pid % heads
    i0 = (qtiles - 1 - pid // heads) * TILE  # heaviest query tiles first
    b = bh // hq
    kvh = b * hkv + (bh % hq) // group
    rows = i0 + tl.arange(0, TILE)
    row_in = rows < sq
    cols = tl.arange(0, DP)
    col_in = cols < HEAD_DIM
    vis_row = vis_ptr + b.to(tl.int64) * sq
    count = tl.load(vis_row + rows, mask=row_in, other=0)  # valid keys each row sees
    n_tiles = tl.cdiv(tl.load(vis_row + tl.minimum(sq, i0 + TILE) - 1), TILE)
    nvalid = tl.load(nvalid_ptr + b)
    kidx_row = kidx_ptr + b.to(tl.int64) * skv
    head_rows, tile_at, tile_mask = _query_tile(bh, rows, row_in, sq, cols, col_in, HEAD_DIM)
    kv_base = kvh.to(tl.int64) * skv * HEAD_DIM
    return row_in, cols, col_in, count, n_tiles, nvalid, kidx_row, kv_base, head_rows, tile_at, tile_mask


# ---- preparation: the valid-key list ------------------------------------------------------------

@triton.jit(do_not_specialize=["skv"])
def attention_prep_keys(valid_ptr, kidx_ptr, cnt_ptr, nvalid_ptr, skv, BLOCK: tl.constexpr):
    """One program per batch row: kidx (valid key positions in order), cnt[j] = valid keys in
    [0, j], nvalid. Chunks of BLOCK keys in order, a running base carried between chunks."""
    pid = tl.program_id(0)
    row = pid.to(tl.int64) * skv
    base = pid * 0  # int32 running count of valid keys
    for j0 in range(0, skv, BLOCK):
        j = j0 + tl.arange(0, BLOCK)
        inside = j < skv
        flag = tl.load(valid_ptr + row + j, mask=inside, other=0).to(tl.int32)
        upto = base + tl.cumsum(flag, axis=0)
        tl.store(cnt_ptr + row + j, upto, mask=inside)
        tl.store(kidx_ptr + row + (upto - 1), j, mask=inside & (flag != 0))
        base += tl.sum(flag, axis=0)
    tl.store(nvalid_ptr + pid, base)


@triton.jit(do_not_specialize=["sq", "skv"])
def attention_prep_vis(kidx_ptr, cnt_ptr, nvalid_ptr, vis_ptr, q0_ptr, sq, skv, BLOCK: tl.constexpr):
    """One program per batch row: vis[i] = #{valid j : j <= i + Skv - Sq}, and q0 = the first
    query that sees a key (Sq if none)."""
    pid = tl.program_id(0)
    row = pid.to(tl.int64) * skv
    offset = skv - sq
    for i0 in range(0, sq, BLOCK):
        i = i0 + tl.arange(0, BLOCK)
        inside = i < sq
        limit = i + offset  # keys j <= limit pass the causal test; limit <= skv - 1
        seen = tl.load(cnt_ptr + row + limit, mask=inside & (limit >= 0), other=0)
        tl.store(vis_ptr + pid.to(tl.int64) * sq + i, seen, mask=inside)
    n = tl.load(nvalid_ptr + pid)
    first = tl.load(kidx_ptr + row, mask=n > 0, other=0)
    q0 = tl.where(n > 0, tl.minimum(tl.maximum(first - offset, 0), sq), sq)
    tl.store(q0_ptr + pid, q0)


# ---- forward (and the backward's LSE / Dsum) ---------------------------------------------------

@triton.jit(do_not_specialize=["hq", "hkv", "sq", "skv", "group", "heads"])
def attention_fwd(q_ptr, k_ptr, v_ptr, dy_ptr, o_ptr, lse_ptr, dsum_ptr, kidx_ptr, nvalid_ptr, vis_ptr,
                  hq, hkv, sq, skv, group, heads, scale,
                  HEAD_DIM: tl.constexpr, DP: tl.constexpr, TILE: tl.constexpr, BACKWARD: tl.constexpr):
    row_in, cols, col_in, count, n_tiles, nvalid, kidx_row, kv_base, head_rows, tile_at, tile_mask = _query_program(
        tl.program_id(0), vis_ptr, nvalid_ptr, kidx_ptr, hq, hkv, sq, skv, group, heads, HEAD_DIM, DP, TILE)
    q = tl.load(q_ptr + tile_at, mask=tile_mask, other=0.0)

    m = tl.full([TILE], -float("inf"), tl.float32)
    l = tl.zeros([TILE], tl.float32)
    acc = tl.zeros([TILE, DP], tl.float32)
    for t in range(0, n_tiles):
        ranks, kv_at, kv_mask = _key_tile(kidx_row, kv_base, t * TILE, nvalid, cols, col_in, HEAD_DIM, TILE)
        k = tl.load(k_ptr + kv_at, mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
        seen = ranks[None, :] < count[:, None]
        x = tl.where(seen, s * scale, -float("inf"))
        tile_max = tl.max(x, axis=1)
        none = tile_max == -float("inf")  # the row sees no key of this tile
        m_new = tl.where(none, m, tl.maximum(m, tile_max))
        alpha = tl.where(none, 1.0, libdevice.exp(m - m_new))  # m = -inf: alpha = 0
        p = tl.where(seen, libdevice.exp(x - m_new[:, None]), 0.0)
        l = tl.where(none, l, tl.fma(l, alpha, tl.sum(p, axis=1)))
        m = m_new
        acc = acc * alpha[:, None]
        p_hi, p_lo = _split_bf16(p)
        v = tl.load(v_ptr + kv_at, mask=kv_mask, other=0.0)
        acc = tl.dot(p_hi, v, acc, input_precision="ieee")
        acc = tl.dot(p_lo, v, acc, input_precision="ieee")

    any_key = count > 0  # then l >= 1
    l_wide = l[:, None] + tl.zeros([TILE, DP], tl.float32)
    o = tl.where(any_key[:, None], tl.div_rn(acc, l_wide), 0.0)
    if BACKWARD:
        dy = tl.load(dy_ptr + tile_at, mask=tile_mask, other=0.0).to(tl.float32)
        dsum = tl.sum(dy * o, axis=1)
        lse = tl.where(any_key, m + libdevice.log(l), float("inf"))
        tl.store(lse_ptr + head_rows, lse, mask=row_in)
        tl.store(dsum_ptr + head_rows, dsum, mask=row_in)
    else:
        tl.store(o_ptr + tile_at, o.to(tl.bfloat16), mask=tile_mask)


# ---- backward -------------------------------------------------------------------------------------

@triton.jit(do_not_specialize=["hq", "hkv", "sq", "skv", "group", "heads"])
def attention_dq(q_ptr, k_ptr, v_ptr, dy_ptr, lse_ptr, dsum_ptr, dq_ptr, kidx_ptr, nvalid_ptr, vis_ptr,
                 hq, hkv, sq, skv, group, heads, scale,
                 HEAD_DIM: tl.constexpr, DP: tl.constexpr, TILE: tl.constexpr):
    row_in, cols, col_in, count, n_tiles, nvalid, kidx_row, kv_base, head_rows, tile_at, tile_mask = _query_program(
        tl.program_id(0), vis_ptr, nvalid_ptr, kidx_ptr, hq, hkv, sq, skv, group, heads, HEAD_DIM, DP, TILE)
    q, dy, lse, dsum = _backward_rows(q_ptr, dy_ptr, lse_ptr, dsum_ptr, head_rows, tile_at, tile_mask, row_in)

    acc = tl.zeros([TILE, DP], tl.float32)
    for t in range(0, n_tiles):
        ranks, kv_at, kv_mask = _key_tile(kidx_row, kv_base, t * TILE, nvalid, cols, col_in, HEAD_DIM, TILE)
        k = tl.load(k_ptr + kv_at, mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + kv_at, mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee")
        dp = tl.dot(dy, tl.trans(v), input_precision="ieee")
        seen = ranks[None, :] < count[:, None]
        p, ds = _probs_and_grads(s, dp, seen, scale, lse[:, None], dsum[:, None])
        ds_hi, ds_lo = _split_bf16(ds)
        acc = tl.dot(ds_hi, k, acc, input_precision="ieee")
        acc = tl.dot(ds_lo, k, acc, input_precision="ieee")
    tl.store(dq_ptr + tile_at, (acc * scale).to(tl.bfloat16), mask=tile_mask)


@triton.jit(do_not_specialize=["hq", "hkv", "sq", "skv", "group", "kv_heads"])
def attention_dkdv(q_ptr, k_ptr, v_ptr, dy_ptr, lse_ptr, dsum_ptr, dk_ptr, dv_ptr, kidx_ptr, nvalid_ptr,
                   vis_ptr, q0_ptr, hq, hkv, sq, skv, group, kv_heads, scale,
                   HEAD_DIM: tl.constexpr, DP: tl.constexpr, TILE: tl.constexpr):
    pid = tl.program_id(0)
    kvh = pid % kv_heads
    t = pid // kv_heads
    b = kvh // hkv
    nvalid = tl.load(nvalid_ptr + b)
    first = t * TILE
    active = first < nvalid  # past this batch row's valid keys: nothing to do
    cols = tl.arange(0, DP)
    col_in = cols < HEAD_DIM
    keys = tl.arange(0, TILE)
    kidx_row = kidx_ptr + b.to(tl.int64) * skv
    ranks, kv_at, kv_mask = _key_tile(kidx_row, kvh.to(tl.int64) * skv * HEAD_DIM, first, nvalid, cols, col_in,
                                      HEAD_DIM, TILE)
    k = tl.load(k_ptr + kv_at, mask=kv_mask, other=0.0)
    v = tl.load(v_ptr + kv_at, mask=kv_mask, other=0.0)

    # Query tiles counted from q0; the first one holding a query that sees this tile's first key.
    q0 = tl.load(q0_ptr + b)
    first_pos = tl.load(kidx_row + first, mask=active, other=0)
    i_first = tl.maximum(first_pos - (skv - sq), 0)
    u_first = (i_first - q0) // TILE
    u_end = tl.where(active, tl.cdiv(sq - q0, TILE), u_first)
    head0 = b * hq + (kvh % hkv) * group
    vis_row = vis_ptr + b.to(tl.int64) * sq

    dk = tl.zeros([TILE, DP], tl.float32)
    dv = tl.zeros([TILE, DP], tl.float32)
    for g in range(0, group):
        bh = head0 + g
        for u in range(u_first, u_end):
            rows = q0 + u * TILE + keys
            row_in = rows < sq
            head_rows, tile_at, tile_mask = _query_tile(bh, rows, row_in, sq, cols, col_in, HEAD_DIM)
            q, dy, lse, dsum = _backward_rows(q_ptr, dy_ptr, lse_ptr, dsum_ptr, head_rows, tile_at, tile_mask, row_in)
            vis = tl.load(vis_row + rows, mask=row_in, other=0)
            s_t = tl.dot(k, tl.trans(q), input_precision="ieee")  # [keys, queries]
            dp_t = tl.dot(v, tl.trans(dy), input_precision="ieee")
            seen = ranks[:, None] < vis[None, :]
            p, ds = _probs_and_grads(s_t, dp_t, seen, scale, lse[None, :], dsum[None, :])
            p_hi, p_lo = _split_bf16(p)
            ds_hi, ds_lo = _split_bf16(ds)
            dv = tl.dot(p_hi, dy, dv, input_precision="ieee")
            dv = tl.dot(p_lo, dy, dv, input_precision="ieee")
            dk = tl.dot(ds_hi, q, dk, input_precision="ieee")
            dk = tl.dot(ds_lo, q, dk, input_precision="ieee")
    tl.store(dk_ptr + kv_at, (dk * scale).to(tl.bfloat16), mask=kv_mask)
    tl.store(dv_ptr + kv_at, dv.to(tl.bfloat16), mask=kv_mask)


# ---- host: input checks (the messages of lib/ops/attention.cpp) -----------------------------------

def _head_major(tensors, name):
    t = S.bf16_input(tensors, OP, name)
    S.require(t.dim() != 3, OP, name,
              f"shape {S.shape_string(t.shape)} is the token-major invariance layout [T, H, D]; attention "
              "takes head-major [B, H, S, D] (the runner lays the tokens out per sample)")
    S.require(t.dim() == 4, OP, name, f"shape {S.shape_string(t.shape)} (expected rank 4, [B, H, S, D])")
    return t


def _check_inputs(tensors, backward):
    """(q, k, v, key_mask bytes or None, dy or None, dims), checked as check_attention_inputs
    (same order, same messages), then the kernels' own limits (as cuda_bf16's)."""
    q, k, v = (_head_major(tensors, name) for name in ("q", "k", "v"))
    b, hq, sq, d = (int(s) for s in q.shape)
    hkv, skv = int(k.shape[1]), int(k.shape[2])
    S.require(d >= 1, OP, "q", f"shape {S.shape_string(q.shape)}: head_dim must be at least 1")
    S.require(list(v.shape) == list(k.shape), OP, "v",
              f"shape {S.shape_string(v.shape)} differs from k {S.shape_string(k.shape)}")
    S.require(int(k.shape[0]) == b and int(k.shape[3]) == d, OP, "k",
              f"shape {S.shape_string(k.shape)} does not fit q {S.shape_string(q.shape)} (batch and head_dim "
              "must agree)")
    S.require(hkv >= 1 and hq >= 1 and hq % hkv == 0, OP, "k",
              f"{hkv} kv heads for {hq} query heads (the query heads must be a positive multiple of the kv heads)")
    mask = None
    if "key_mask" in tensors:
        m = S.tensor_input(tensors, OP, "key_mask", torch.bool)
        S.require(list(m.shape) == [b, skv], OP, "key_mask",
                  f"shape {S.shape_string(m.shape)} (expected [B, Skv] = [{b}, {skv}])")
        mask = m.contiguous().view(torch.uint8).reshape(-1)
        for i, byte in enumerate(mask.tolist()):
            S.require(byte <= 1, OP, "key_mask", f"element {i} holds byte {byte} (a bool must be 0 or 1)")
    dy = None
    if backward:
        dy = S.bf16_input(tensors, OP, "dy.o")
        S.require(list(dy.shape) == list(q.shape), OP, "dy.o",
                  f"shape {S.shape_string(dy.shape)} differs from q {S.shape_string(q.shape)}")
    S.require(d <= MAX_HEAD_DIM, OP, "q",
              f"head_dim {d} exceeds the triton_cuda_bf16 kernels' limit of {MAX_HEAD_DIM}")
    limit = (2**31 - 1) // 2
    S.require(sq <= limit and skv <= limit and b * hq * S.cdiv(sq, TILE) <= limit and
              b * hkv * S.cdiv(skv, TILE) <= limit, OP, "q",
              "shape too large for the triton_cuda_bf16 kernels' 32-bit row and program indices")
    dims = {"b": b, "hq": hq, "hkv": hkv, "sq": sq, "skv": skv, "d": d, "group": hq // hkv}
    return q, k, v, mask, dy, dims


# ---- host: launches -------------------------------------------------------------------------------

def _padded_dim(d):
    return max(32, triton.next_power_of_2(d))


def _launch(kernel, grid, args, d, warps_small, warps_large, **constexprs):
    dp = _padded_dim(d)
    S.launch(kernel, grid, *args, HEAD_DIM=d, DP=dp, TILE=TILE, num_warps=warps_small if dp <= 128 else warps_large,
             num_stages=2, enable_reflect_ftz=False, **constexprs)


def _prepare_keys(mask, n):
    """kidx, nvalid, vis, q0 on the device (attention_prep_keys, attention_prep_vis)."""
    b, sq, skv = n["b"], n["sq"], n["skv"]
    if mask is None:
        valid = torch.ones(b * skv, dtype=torch.uint8, device=S.DEVICE)
    else:
        valid = S.to_device(mask)
    kidx = torch.zeros(b * skv, dtype=torch.int32, device=S.DEVICE)  # entries past nvalid unused
    cnt = S.poisoned((b * skv,), torch.int32)
    nvalid = S.poisoned((b,), torch.int32)
    vis = S.poisoned((b * sq,), torch.int32)
    q0 = S.poisoned((b,), torch.int32)
    S.launch(attention_prep_keys, (b,), valid, kidx, cnt, nvalid, skv, BLOCK=PREP_BLOCK, num_warps=4)
    S.launch(attention_prep_vis, (b,), kidx, cnt, nvalid, vis, q0, sq, skv, BLOCK=PREP_BLOCK, num_warps=4)
    return kidx, nvalid, vis, q0


def _runs(n):
    """False where there is nothing to compute: no query rows, or no keys at all (every row then
    sees no key: o = 0, no gradient)."""
    return n["b"] * n["hq"] * n["sq"] > 0 and n["skv"] > 0


def attention_forward(tensors, context):
    q_in, k_in, v_in, mask, _, n = _check_inputs(tensors, backward=False)
    if not _runs(n):
        return {"o": torch.zeros(tuple(q_in.shape), dtype=torch.bfloat16)}
    q, k, v = S.to_device(q_in), S.to_device(k_in), S.to_device(v_in)
    kidx, nvalid, vis, _ = _prepare_keys(mask, n)
    o = S.poisoned(q.shape, torch.bfloat16)  # every element is written
    heads = n["b"] * n["hq"]
    # dy, LSE and Dsum are not read in forward mode: stand-ins.
    args = (q, k, v, q, o, o, o, kidx, nvalid, vis, n["hq"], n["hkv"], n["sq"], n["skv"], n["group"], heads,
            S.f32(1.0 / math.sqrt(n["d"])))
    _launch(attention_fwd, (heads * S.cdiv(n["sq"], TILE),), args, n["d"], 4, 8, BACKWARD=False)
    return {"o": S.to_host(o)}


def attention_backward(tensors, context):
    q_in, k_in, v_in, mask, dy_in, n = _check_inputs(tensors, backward=True)
    if not _runs(n):
        return {"dq": torch.zeros(tuple(q_in.shape), dtype=torch.bfloat16),
                "dk": torch.zeros(tuple(k_in.shape), dtype=torch.bfloat16),
                "dv": torch.zeros(tuple(v_in.shape), dtype=torch.bfloat16)}
    q, k, v, dy = S.to_device(q_in), S.to_device(k_in), S.to_device(v_in), S.to_device(dy_in)
    kidx, nvalid, vis, q0 = _prepare_keys(mask, n)
    rows = n["b"] * n["hq"] * n["sq"]
    lse = S.poisoned((rows,), torch.float32)
    dsum = S.poisoned((rows,), torch.float32)
    dq = S.poisoned(q.shape, torch.bfloat16)  # every element is written
    dk = torch.zeros(k.shape, dtype=torch.bfloat16, device=S.DEVICE)  # masked-out keys keep exact zeros
    dv = torch.zeros(v.shape, dtype=torch.bfloat16, device=S.DEVICE)
    scale = S.f32(1.0 / math.sqrt(n["d"]))
    heads, kv_heads = n["b"] * n["hq"], n["b"] * n["hkv"]
    dims = (n["hq"], n["hkv"], n["sq"], n["skv"], n["group"])
    grid = (heads * S.cdiv(n["sq"], TILE),)
    _launch(attention_fwd, grid, (q, k, v, dy, q, lse, dsum, kidx, nvalid, vis, *dims, heads, scale),
            n["d"], 4, 8, BACKWARD=True)
    _launch(attention_dq, grid, (q, k, v, dy, lse, dsum, dq, kidx, nvalid, vis, *dims, heads, scale), n["d"], 4, 8)
    _launch(attention_dkdv, (kv_heads * S.cdiv(n["skv"], TILE),),
            (q, k, v, dy, lse, dsum, dk, dv, kidx, nvalid, vis, q0, *dims, kv_heads, scale), n["d"], 8, 8)
    return {"dq": S.to_host(dq), "dk": S.to_host(dk), "dv": S.to_host(dv)}


KERNELS = S.kernel_entries(
    OP,
    forward=([attention_prep_keys, attention_prep_vis, attention_fwd], attention_forward),
    backward=([attention_prep_keys, attention_prep_vis, attention_fwd, attention_dq, attention_dkdv],
              attention_backward))
