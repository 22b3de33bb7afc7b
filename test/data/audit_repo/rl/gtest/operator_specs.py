import torch


class NativeGemmOp:
    """torch.matmul (cuBLAS) reference."""

    def __call__(self, a, b):
        return torch.matmul(a, b)


def reference_linear(x, w):
    return torch.matmul(x.float(), w.float().t())


def ref_mm(a, b):
    a32 = a.to(torch.float32)
    b32 = b.to(dtype=torch.float32)
    return torch.mm(a32, b32)


def gold_bmm(a, b):
    return torch.bmm(a, b).float()


def candidate_gemm(a, b):
    return torch.matmul(a, b)


def preferred_layout(a, b):
    return torch.matmul(a, b)


def reference_half(a, b):
    # torch.matmul(a.float(), b.float()) would be right
    return torch.matmul(a.bfloat16(),
                        b.bfloat16())
