"""Row-sum reduction of a 2-D tensor (Triton)."""

import torch

DESCRIPTION = "Sum over the last dimension: (rows, cols) -> (rows,)"
DEVICE = "cuda"
SHAPES = [(4096, 4096), (16384, 1024)]
CHECK_SHAPES = [(1, 1), (3, 17), (37, 130), (4, 1000), (7, 2049)]
DTYPES = ["float32", "float16"]
# Row sums of uniform [0, 1) inputs concentrate near cols/2 (about 1% spread at 2k
# columns), so the default fp16 rtol of 1e-2 would accept a constant. The sum is
# accumulated in fp32 and rounded once to fp16 (2^-11 relative), so 2e-3 is ample.
TOLERANCES = {"float16": (2e-3, 1e-2)}
TUNABLES = {"BLOCK_SIZE": [64, 128, 256, 512, 1024, 2048], "NUM_WARPS": [1, 2, 4, 8]}


def reference(x):
    return x.sum(dim=-1)


def make_inputs(shape, dtype, device, generator):
    return (torch.randn(*shape, generator=generator, dtype=dtype, device=device),)


def flops(shape):
    rows, cols = shape
    return rows * cols


def bytes_moved(shape, dtype):
    rows, cols = shape
    return (rows * cols + rows) * torch.empty((), dtype=dtype).element_size()
