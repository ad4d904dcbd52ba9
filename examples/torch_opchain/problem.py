"""Unfused PyTorch elementwise chain: gelu(x * scale + shift) * sigmoid(x) + residual."""

import torch

DESCRIPTION = "y = gelu(x * scale + shift) * sigmoid(x) + residual, x/residual (rows, cols), scale/shift (cols,)"
DEVICE = "cpu"
SHAPES = [(2048, 1024), (1024, 4096)]
CHECK_SHAPES = [(1, 1), (3, 17), (37, 130), (5, 1000), (129, 33)]
DTYPES = ["float32"]
TUNABLES = {"CHUNK_ROWS": [8, 16, 64, 256, 1024, 4096]}


def reference(x, scale, shift, residual):
    return torch.nn.functional.gelu(x * scale + shift) * torch.sigmoid(x) + residual


def make_inputs(shape, dtype, device, generator):
    rows, cols = shape
    x = torch.randn(rows, cols, generator=generator, dtype=dtype, device=device)
    scale = torch.randn(cols, generator=generator, dtype=dtype, device=device)
    shift = torch.randn(cols, generator=generator, dtype=dtype, device=device)
    residual = torch.randn(rows, cols, generator=generator, dtype=dtype, device=device)
    return x, scale, shift, residual


def flops(shape):
    rows, cols = shape
    return 20 * rows * cols


def bytes_moved(shape, dtype):
    rows, cols = shape
    return (3 * rows * cols + 2 * cols) * torch.empty((), dtype=dtype).element_size()
