"""Bias + exact GELU + residual add + LayerNorm over rows, float32 on the CPU (C++/OpenMP).

torch eager runs it as four kernels (add, gelu, add, layer_norm), each reading and writing a
(rows, cols) buffer: about ten passes over memory. A fused kernel reads x and the residual once,
keeps each row in L1 while it takes the row's mean and variance, and writes the output once.
"""

import torch

DESCRIPTION = (
    "y = layer_norm(gelu(x + bias) + residual) * weight + beta, x/residual (rows, cols), bias/weight/beta (cols,)"
)
DEVICE = "cpu"
SHAPES = [(4096, 1024)]  # 16 MB per (rows, cols) buffer: 32 MB read, 16 MB written by a fused kernel
CHECK_SHAPES = [(1, 7), (3, 17), (37, 130), (5, 1000), (2, 4099)]
DTYPES = ["float32"]
TUNABLES = {"THREADS": [1, 2], "ROW_BLOCK": [1, 4, 16, 64]}
EPS = 1e-5


def reference(x, bias, residual, weight, beta):
    h = torch.nn.functional.gelu(x + bias) + residual
    return torch.nn.functional.layer_norm(h, (h.shape[-1],), weight, beta, eps=EPS)


def make_inputs(shape, dtype, device, generator):
    rows, cols = shape
    x = torch.randn(rows, cols, generator=generator, dtype=dtype, device=device)
    bias = torch.randn(cols, generator=generator, dtype=dtype, device=device)
    residual = torch.randn(rows, cols, generator=generator, dtype=dtype, device=device)
    weight = 1 + 0.5 * torch.randn(cols, generator=generator, dtype=dtype, device=device)
    beta = torch.randn(cols, generator=generator, dtype=dtype, device=device)
    return x, bias, residual, weight, beta


def flops(shape):
    rows, cols = shape
    return 30 * rows * cols


def bytes_moved(shape, dtype):
    rows, cols = shape
    return (3 * rows * cols + 3 * cols) * torch.empty((), dtype=dtype).element_size()
