import triton
import triton.language as tl


@triton.jit
def kernel(q, k, v, acc, a, b):
    acc += tl.dot(q, k)
    acc = tl.dot(p, v, acc, input_precision="tf32")
    acc = tl.dot(
        q,
        k,
        input_precision="ieee",
    )
    acc = tl.dot(a, b, allow_tf32=False)
    acc = tl.dot(a, b, allow_tf32=True)
    # acc = tl.dot(x, y)
    s = "tl.dot(x, y)"
    acc = tl.dot_scaled(a, None, "e4m3", b, None, "e4m3")
    acc = triton.language.dot(a, b)
