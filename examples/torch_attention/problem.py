"""Scaled dot-product attention softmax(q @ k^T / sqrt(d)) @ v in PyTorch; shapes (batch, heads, seq, dim)."""

import math

import torch

DESCRIPTION = "Non-causal attention softmax(q k^T / sqrt(d)) v for q, k, v (batch, heads, seq, dim)"
DEVICE = "cpu"
SHAPES = [(4, 8, 256, 64), (1, 4, 1024, 32)]
CHECK_SHAPES = [(1, 1, 1, 1), (1, 2, 3, 5), (2, 3, 37, 16), (1, 5, 130, 24)]
DTYPES = ["float32"]
TUNABLES = {"BLOCK_HEADS": [1, 2, 4, 8, 16]}


def reference(q, k, v):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def make_inputs(shape, dtype, device, generator):
    return tuple(torch.randn(*shape, generator=generator, dtype=dtype, device=device) for _ in range(3))


def flops(shape):
    b, h, s, d = shape
    return 4 * b * h * s * s * d


def bytes_moved(shape, dtype):
    b, h, s, d = shape
    return 4 * b * h * s * d * torch.empty((), dtype=dtype).element_size()
