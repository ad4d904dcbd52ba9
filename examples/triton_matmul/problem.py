"""Dense matrix multiply C = A @ B (Triton); shapes are (M, N, K)."""

import torch

DESCRIPTION = "C = A @ B with A (M, K), B (K, N); fp32 accumulation"
DEVICE = "cuda"
SHAPES = [(2048, 2048, 2048), (4096, 4096, 1024)]
CHECK_SHAPES = [(1, 1, 1), (3, 17, 5), (37, 29, 41), (16, 64, 48), (50, 33, 64)]
DTYPES = ["float32", "float16"]
# fp16: outputs are K-term dot products of magnitude ~sqrt(K) (45 at K=2048).
# fp32 accumulation rounded once to fp16 stays well inside atol 5e-2, while
# fp16 accumulation (error ~sqrt(K) * 45 * 2^-11, about 1) does not.
TOLERANCES = {"float16": (1e-2, 5e-2)}
TUNABLES = {
    "BLOCK_M": [16, 32, 64, 128],
    "BLOCK_N": [16, 32, 64, 128],
    "BLOCK_K": [16, 32, 64],
    "NUM_WARPS": [2, 4, 8],
    "NUM_STAGES": [1, 2, 3],
}


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
