"""Triton row softmax, a tuning family for GPUs: its best block and warp count change with row length.

Verified on a CPU under the Triton interpreter; timed only on a GPU. Shapes are (rows, cols). TUNE_SHAPES train
selectors; HELDOUT_SHAPES (disjoint) only score them.
"""

import torch

DESCRIPTION = "Row-wise softmax of a (rows, cols) float32 matrix, tunable Triton (block, warps)"
DEVICE = "cuda"
SHAPES = [(4096, 4096), (64, 32768)]
CHECK_SHAPES = [(1, 1), (3, 17), (37, 130), (2, 4099)]
DTYPES = ["float32"]
TOLERANCES = {"float32": (1e-4, 1e-6)}  # outputs are ~1/cols: the default atol would accept almost anything
SHAPE_NAMES = ("rows", "cols")
TUNABLES = {"BLOCK_SIZE": [64, 128, 256, 512, 1024, 2048], "NUM_WARPS": [1, 2, 4, 8]}
# The analytical selector's rows model is CPU-shaped (threads over rows, vector lanes): one program per row and
# the block as its vector is a rough reading of it on a GPU.
COST_MODEL = {"kind": "rows", "vector": "BLOCK_SIZE"}
TUNE_SHAPES = [
    (1, 4096),
    (64, 64),
    (1024, 128),
    (256, 1024),
    (16, 16384),
    (4096, 32),
    (128, 4096),
    (512, 512),
]
HELDOUT_SHAPES = [
    (2, 2048),
    (8, 8192),
    (32, 32),
    (2048, 64),
    (100, 1000),
    (333, 777),
    (4, 32768),
    (4096, 256),
    (64, 2048),
    (1024, 1024),
    (8192, 16),
    (17, 5000),
]


def reference(x):
    return torch.softmax(x, dim=-1)


def make_inputs(shape, dtype, device, generator):
    return (torch.randn(*shape, generator=generator, dtype=dtype, device=device),)


# The inverse of make_inputs: an exported kernel picks its tuned config by the shape of each call.
def shape_of(x):
    return tuple(x.shape)
