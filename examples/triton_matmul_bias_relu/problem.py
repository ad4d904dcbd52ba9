"""Matmul with a fused bias + ReLU epilogue: relu(A @ B + bias) (Triton); shapes (M, N, K)."""

import torch

DESCRIPTION = "relu(A @ B + bias) with A (M, K), B (K, N), bias (N,)"
DEVICE = "cuda"
SHAPES = [(2048, 2048, 2048), (4096, 4096, 1024)]
CHECK_SHAPES = [(1, 1, 1), (3, 17, 5), (37, 29, 41), (16, 64, 48), (50, 33, 64)]
DTYPES = ["float32", "float16"]
# fp16: see triton_matmul; outputs are ~sqrt(K) in size, atol covers one fp16
# rounding of an fp32-accumulated result but not fp16 accumulation.
TOLERANCES = {"float16": (1e-2, 5e-2)}
TUNABLES = {
    "BLOCK_M": [16, 32, 64, 128],
    "BLOCK_N": [16, 32, 64, 128],
    "BLOCK_K": [16, 32, 64],
    "NUM_WARPS": [2, 4, 8],
    "NUM_STAGES": [1, 2, 3],
    "EPILOGUE_BLOCK": [128, 256, 1024, 4096],
}


def reference(a, b, bias):
    return torch.relu(a @ b + bias)


def make_inputs(shape, dtype, device, generator):
    m, n, k = shape
    a = torch.randn(m, k, generator=generator, dtype=dtype, device=device)
    b = torch.randn(k, n, generator=generator, dtype=dtype, device=device)
    # Signed bias of the size of the products, so about half the outputs are positive.
    bias = torch.randn(n, generator=generator, dtype=dtype, device=device)
    return a, b, bias


def flops(shape):
    m, n, k = shape
    return 2 * m * n * k + 2 * m * n


def bytes_moved(shape, dtype):
    m, n, k = shape
    return (m * k + k * n + m * n + n) * torch.empty((), dtype=dtype).element_size()
