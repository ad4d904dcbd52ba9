"""RMSNorm over the last dimension with a learned weight vector (Triton)."""

import torch

DESCRIPTION = "RMSNorm: x * rsqrt(mean(x^2, -1) + 1e-6) * w for x (rows, cols), w (cols,)"
DEVICE = "cuda"
SHAPES = [(4096, 4096), (16384, 1024)]
CHECK_SHAPES = [(1, 1), (3, 17), (37, 130), (4, 1000), (2, 2049)]
DTYPES = ["float32", "float16"]
TUNABLES = {"BLOCK_SIZE": [64, 128, 256, 512, 1024, 2048], "NUM_WARPS": [1, 2, 4, 8]}
EPS = 1e-6


def reference(x, w):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * w


def make_inputs(shape, dtype, device, generator):
    rows, cols = shape
    x = torch.randn(rows, cols, generator=generator, dtype=dtype, device=device)
    w = torch.randn(cols, generator=generator, dtype=dtype, device=device)
    return x, w


def flops(shape):
    rows, cols = shape
    return 4 * rows * cols  # square+add, scale, multiply by w


def bytes_moved(shape, dtype):
    rows, cols = shape
    return (2 * rows * cols + cols) * torch.empty((), dtype=dtype).element_size()
