"""Row softmax on the GPU (adversarial GPU fixtures); the baseline upcasts to float64."""

import torch

DESCRIPTION = "row softmax on CUDA (adversarial GPU fixtures)"
DEVICE = "cuda"
SHAPES = [(4096, 4096)]
CHECK_SHAPES = [(1, 1), (3, 17), (37, 130), (1000, 1000)]
DTYPES = ["float32"]
TOLERANCES = {"float32": (1e-4, 1e-6)}


def reference(x):
    return torch.softmax(x, dim=-1)


def make_inputs(shape, dtype, device, generator):
    return (torch.randn(shape, generator=generator, dtype=dtype, device=device) * 2,)
