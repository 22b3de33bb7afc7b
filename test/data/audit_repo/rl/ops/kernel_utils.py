import torch


def close(a, b):
    return torch.allclose(a, b, atol=1e-3, rtol=1e-3)
