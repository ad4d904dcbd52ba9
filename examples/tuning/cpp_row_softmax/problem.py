"""Row softmax on the CPU (C++/OpenMP), a tuning family: its best row block and vector width change with row length.

Shapes are (rows, cols). TUNE_SHAPES are timed to train selectors; HELDOUT_SHAPES (disjoint) only score them.
"""

import torch

DESCRIPTION = "Row-wise softmax of a (rows, cols) float32 matrix, tunable C++/OpenMP"
DEVICE = "cpu"
SHAPES = [(1024, 1024), (16, 16384)]
CHECK_SHAPES = [(1, 1), (3, 17), (37, 130), (2, 4099)]
DTYPES = ["float32"]
TOLERANCES = {"float32": (1e-4, 1e-6)}  # outputs are ~1/cols: the default atol would accept almost anything
SHAPE_NAMES = ("rows", "cols")
TUNABLES = {
    "ROW_BLOCK": [1, 16, 256],
    "VEC": [1, 8],
    "THREADS": [1, 2],
    "STORE_EXP": [0, 1],
}
# Which tunable plays which part in the analytical selector's cost model (kernel_agent/select/analytical.py).
COST_MODEL = {"kind": "rows", "row_block": "ROW_BLOCK", "vector": "VEC", "threads": "THREADS", "store": "STORE_EXP"}
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


def flops(shape):
    rows, cols = shape
    return 4 * rows * cols


def bytes_moved(shape, dtype):
    rows, cols = shape
    return 2 * rows * cols * torch.empty((), dtype=dtype).element_size()
