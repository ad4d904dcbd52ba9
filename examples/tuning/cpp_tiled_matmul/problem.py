"""Tiled float32 matmul C = A @ B on the CPU (C++/OpenMP), a tuning family: its best tiles change with the shape.

Shapes are (M, N, K). TUNE_SHAPES are timed to train selectors; HELDOUT_SHAPES (disjoint) only score them.
"""

import torch

DESCRIPTION = "C = A @ B with A (M, K), B (K, N), float32, tiled C++/OpenMP"
DEVICE = "cpu"
SHAPES = [(256, 256, 256), (8, 512, 512)]
CHECK_SHAPES = [(1, 1, 1), (3, 17, 5), (37, 29, 41), (65, 130, 33)]
DTYPES = ["float32"]
SHAPE_NAMES = ("M", "N", "K")
TUNABLES = {
    "TILE_M": [4, 32, 128],
    "TILE_N": [32, 128, 512],
    "TILE_K": [256],
    "ORDER": [0, 1],
}
# Which tunable plays which part in the analytical selector's tile arithmetic (kernel_agent/select/analytical.py).
COST_MODEL = {"kind": "matmul", "tile_m": "TILE_M", "tile_n": "TILE_N", "tile_k": "TILE_K", "order": "ORDER"}
# Small, skinny, odd and large: the selector is trained on these ...
TUNE_SHAPES = [
    (64, 64, 64),
    (256, 256, 256),
    (512, 512, 512),
    (8, 512, 512),
    (512, 8, 512),
    (128, 1024, 64),
    (1024, 128, 128),
    (96, 300, 200),
]
# ... and scored on these only.
HELDOUT_SHAPES = [
    (32, 32, 32),
    (128, 128, 128),
    (384, 384, 384),
    (16, 256, 256),
    (256, 16, 256),
    (4, 1024, 256),
    (1024, 4, 256),
    (200, 200, 200),
    (100, 700, 100),
    (700, 100, 300),
    (48, 48, 1024),
    (640, 320, 160),
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
