"""Planted: hard-coded tolerances in a test (docstring mentions atol=1e-3, not counted)."""
import pytest
import torch

ATOL = 5e-3
TOLS = {"atol": 1e-2, "rtol": 1e-2}


def check(out, ref, atol: float = 0.1):
    torch.testing.assert_close(out, ref, atol=1e-2, rtol=1.6e-2)
    torch.testing.assert_close(out, ref, atol=row["atol"], rtol=row["rtol"])
    # torch.testing.assert_close(out, ref, atol=1e-3)
    s = "atol=1e-3"
    if atol == 0:
        assert out == pytest.approx(ref, abs=1e-3)
    assert torch.allclose(out, ref,
                          atol=-1e-4)
