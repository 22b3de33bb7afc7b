import torch


def logp_forward(logits, target):
    n = logits.shape[0]
    out = torch.empty_like(logits)
    lse = logits.new_empty(n)
    logp = torch.empty(n, dtype=logits.dtype, device=logits.device)
    logp32 = torch.empty_like(logits, dtype=torch.float32)
    logps = logits.new_empty(n, dtype=torch.float32)
    return out, lse, logp, logp32, logps


def logp_backward(logits, grad):
    out = torch.empty_like(logits)
    dlogits = torch.empty_like(logits)
    return out, dlogits


def softmax_forward(logits):
    out = torch.empty_like(logits)
    return out
