"""lm_head on triton_cuda_bf16 (lib/ops/lm_head.cpp states the definition; cuda/ops/lm_head.cu is
the model): logits[T,V] = hidden[T,H] @ weight[V,H]^T, bf16 out; backward dhidden[T,H] =
dy[T,V] @ weight (sum over V) and dweight[V,H] = dy^T @ hidden (sum over T), bf16 out.
hidden is [..., H] (the leading dims are the rows); the outputs keep the inputs' shapes.

Kernel: _gemm.mma_gemm_kernel once per product (NT for the logits, NN for dhidden, TN for
dweight, as strided views of the same buffers). Order per output element (_gemm): k in 64-wide
tl.dot slices in increasing k on the tensor cores (bf16 operands, FP32 accumulator,
input_precision="ieee"), rounded once to bf16; for K > 4096 (dhidden over V = 151936, dweight
over more than 4096 rows) the accumulator restarts every 512 k and is added into an FP32 total
with round-to-nearest adds, as gemm_tiles.cuh promotes it. One program owns a tile's whole K: no
split-K, no atomics, deterministic. A row of logits / dhidden depends on that row of hidden / dy
and on the weight only, with a constant tile shape: batch-invariant. dweight sums over the rows
of the call in increasing row order (it depends on them by definition).
Not bit-equal to cpu_bf16 (32-wide FMA chunks folded in FP32): the tensor core sums each
16-product step in its own order. Both are FP32 accumulations judged against the reference.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _gemm as G  # noqa: E402
import _support as S  # noqa: E402

OP = "lm_head"


def _inputs(tensors, backward):
    """hidden [..., H], weight [V, H] and (backward) dy.logits, checked like lm_head_inputs()."""
    h = S.bf16_input(tensors, OP, "hidden")
    w = S.bf16_input(tensors, OP, "weight", 2)
    dy = S.bf16_input(tensors, OP, "dy.logits") if backward else None
    S.require(h.dim() >= 1, OP, "hidden", "needs at least one dimension")
    width = h.shape[-1]
    S.require(w.shape[1] == width, OP, "weight",
              f"shape {S.shape_string(w.shape)} does not fit hidden {S.shape_string(h.shape)} "
              f"(needs [V, {width}])")
    logits_shape = list(h.shape[:-1]) + [w.shape[0]]
    if dy is not None:
        S.require(list(dy.shape) == logits_shape, OP, "dy.logits",
                  f"shape {S.shape_string(dy.shape)} (expected the logits' shape {S.shape_string(logits_shape)})")
    rows = 1
    for d in h.shape[:-1]:
        rows *= int(d)
    return h, w, dy, rows, int(width), int(w.shape[0]), logits_shape


def forward(tensors, context):
    h, w, _, rows, width, vocab, logits_shape = _inputs(tensors, False)
    hidden = S.to_device(h).reshape(rows, width)
    weight = S.to_device(w)
    logits = G.gemm(hidden, weight.t())  # [T, H] @ [H, V]
    return {"logits": S.to_host(logits.reshape(logits_shape))}


def backward(tensors, context):
    h, w, dy, rows, width, vocab, _ = _inputs(tensors, True)
    hidden = S.to_device(h).reshape(rows, width)
    weight = S.to_device(w)
    g = S.to_device(dy).reshape(rows, vocab)
    dhidden = G.gemm(g, weight)        # [T, V] @ [V, H]: the sum over V
    dweight = G.gemm(g.t(), hidden)    # [V, T] @ [T, H]: the sum over the rows
    return {"dhidden": S.to_host(dhidden.reshape(h.shape)), "dweight": S.to_host(dweight)}


KERNELS = S.kernel_entries(OP, forward=([G.mma_gemm_kernel], forward),
                           backward=([G.mma_gemm_kernel], backward))
