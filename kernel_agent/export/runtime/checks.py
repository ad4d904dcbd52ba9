"""Shared by the generated tests: an output against its float64 reference (exported by kernel-agent)."""

import torch


def outputs(value):
    return (value,) if isinstance(value, torch.Tensor) else tuple(value)


def available(device):
    return device == "cpu" or (device == "cuda" and torch.cuda.is_available())


def assert_matches(got, gold, base, rtol, atol):
    """`got` against the float64 `gold` within the tolerances; shape, dtype and device as the reference's own `base`."""
    assert len(got) == len(base)
    for out, expected, same_dtype in zip(got, gold, base):
        assert out.shape == same_dtype.shape and out.dtype == same_dtype.dtype and out.device == same_dtype.device
        torch.testing.assert_close(out.double(), expected.double(), rtol=rtol, atol=atol)
