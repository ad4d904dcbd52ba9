"""Triton matmul C = A @ B with grouped program order, a tuning family for GPUs; shapes are (M, N, K).

Verified on a CPU under the Triton interpreter; timed only on a GPU. TUNE_SHAPES train selectors;
HELDOUT_SHAPES (disjoint) only score them.
"""

import torch

DESCRIPTION = "C = A @ B with A (M, K), B (K, N); fp32 accumulation; BLOCK/GROUP/warps/stages tunable"
DEVICE = "cuda"
SHAPES = [(2048, 2048, 2048), (64, 4096, 4096)]
CHECK_SHAPES = [(1, 1, 1), (3, 17, 5), (37, 29, 41), (16, 64, 48)]
DTYPES = ["float16"]
TOLERANCES = {"float16": (1e-2, 5e-2)}  # fp32 accumulation rounded once to fp16 (see examples/triton_matmul)
SHAPE_NAMES = ("M", "N", "K")
TUNABLES = {
    "BLOCK_M": [32, 64, 128],
    "BLOCK_N": [32, 64, 128],
    "BLOCK_K": [32, 64],
    "GROUP_M": [1, 8],
    "NUM_WARPS": [4, 8],
    "NUM_STAGES": [2, 4],
}
COST_MODEL = {
    "kind": "matmul",
    "tile_m": "BLOCK_M",
    "tile_n": "BLOCK_N",
    "tile_k": "BLOCK_K",
    "group_m": "GROUP_M",
    "warps": "NUM_WARPS",
    "stages": "NUM_STAGES",
}
TUNE_SHAPES = [
    (512, 512, 512),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (16, 4096, 4096),
    (4096, 16, 4096),
    (1024, 8192, 256),
    (8192, 1024, 1024),
    (777, 1333, 555),
]
HELDOUT_SHAPES = [
    (256, 256, 256),
    (1024, 1024, 1024),
    (3072, 3072, 3072),
    (32, 2048, 2048),
    (2048, 32, 2048),
    (8, 8192, 1024),
    (8192, 8, 1024),
    (1500, 1500, 1500),
    (500, 3000, 700),
    (3000, 500, 900),
    (128, 128, 8192),
    (6144, 2048, 512),
]


def reference(a, b):
    return a @ b


def make_inputs(shape, dtype, device, generator):
    m, n, k = shape
    a = torch.randn(m, k, generator=generator, dtype=dtype, device=device)
    b = torch.randn(k, n, generator=generator, dtype=dtype, device=device)
    return a, b


# The inverse of make_inputs: an exported kernel picks its tuned config by the shape of each call.
def shape_of(a, b):
    return (a.shape[0], b.shape[1], a.shape[1])


def flops(shape):
    m, n, k = shape
    return 2 * m * n * k


def bytes_moved(shape, dtype):
    m, n, k = shape
    return (m * k + k * n + m * n) * torch.empty((), dtype=dtype).element_size()
