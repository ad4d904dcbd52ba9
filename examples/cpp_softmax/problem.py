"""Row softmax on the CPU with a C++/OpenMP kernel."""

import torch

DESCRIPTION = "Row-wise softmax of a (rows, cols) float32 matrix on the CPU"
DEVICE = "cpu"
SHAPES = [(1024, 1024), (256, 4096)]
CHECK_SHAPES = [(1, 1), (3, 17), (37, 130), (5, 1000), (2, 4099)]
DTYPES = ["float32"]
# Softmax outputs are ~1/cols (1e-3 at 1024 columns), so the default atol of
# 1e-4 would accept almost any positive output; tighten atol to probe values.
TOLERANCES = {"float32": (1e-4, 1e-6)}
TUNABLES = {"THREADS": [1, 2], "ROW_BLOCK": [1, 4, 16, 64]}


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
