"""Tanh-approximation GELU, elementwise (Triton)."""

import math

import torch

DESCRIPTION = "GELU (tanh approximation) of a 1-D or 2-D tensor"
DEVICE = "cuda"
SHAPES = [(1 << 24,), (8192, 8192)]
CHECK_SHAPES = [(1,), (17,), (1000,), (3, 17), (37, 130), (5, 4097)]
DTYPES = ["float32", "float16"]
TUNABLES = {"BLOCK_SIZE": [64, 128, 256, 512, 1024, 2048, 4096], "NUM_WARPS": [1, 2, 4, 8]}


def reference(x):
    return torch.nn.functional.gelu(x, approximate="tanh")


def make_inputs(shape, dtype, device, generator):
    return (torch.randn(*shape, generator=generator, dtype=dtype, device=device),)


def flops(shape):
    return 10 * math.prod(shape)


def bytes_moved(shape, dtype):
    return 2 * math.prod(shape) * torch.empty((), dtype=dtype).element_size()
