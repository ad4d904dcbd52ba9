"""Dense float32 matrix multiply C = A @ B on the CPU (C++/OpenMP); shapes are (M, N, K)."""

import torch

DESCRIPTION = "C = A @ B with A (M, K), B (K, N), float32 on the CPU"
DEVICE = "cpu"
SHAPES = [(256, 256, 256), (300, 200, 250)]
CHECK_SHAPES = [(1, 1, 1), (3, 17, 5), (37, 29, 41), (65, 130, 33), (100, 1, 257)]
DTYPES = ["float32"]
TUNABLES = {"THREADS": [1, 2], "TILE": [16, 32, 64, 128]}


def reference(a, b):
    return a @ b


def make_inputs(shape, dtype, device, generator):
    m, n, k = shape
    a = torch.randn(m, k, generator=generator, dtype=dtype, device=device)
    b = torch.randn(k, n, generator=generator, dtype=dtype, device=device)
    return a, b


def flops(shape):
    m, n, k = shape
    return 2 * m * n * k


def bytes_moved(shape, dtype):
    m, n, k = shape
    return (m * k + k * n + m * n) * torch.empty((), dtype=dtype).element_size()
