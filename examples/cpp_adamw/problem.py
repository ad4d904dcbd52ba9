"""One AdamW step over a flat float32 parameter buffer on the CPU (C++/OpenMP).

The reference is the op-by-op update that torch.optim.AdamW runs on CPU tensors by default
(foreach=False, fused=False), written out of place: about a dozen elementwise passes over
memory, each reading and writing a full buffer. A fused kernel reads param, grad, exp_avg and
exp_avg_sq once and writes the three new buffers once.
"""

import math

import torch

DESCRIPTION = "AdamW step (lr 1e-3, betas 0.9/0.999, eps 1e-8, weight decay 1e-2, step 10) over a flat (n,) buffer"
DEVICE = "cpu"
SHAPES = [(1 << 22,)]  # 4M parameters: 16 MB per buffer, 64 MB of inputs, 48 MB of outputs
CHECK_SHAPES = [(1,), (7,), (33,), (1000,), (4099,)]
DTYPES = ["float32"]
TUNABLES = {"THREADS": [1, 2], "CHUNK": [1024, 4096, 16384, 65536]}

LR, BETA1, BETA2, EPS, WEIGHT_DECAY, STEP = 1e-3, 0.9, 0.999, 1e-8, 1e-2, 10


def reference(param, grad, exp_avg, exp_avg_sq):
    """Returns (new param, new exp_avg, new exp_avg_sq), as torch.optim.AdamW's single-tensor step."""
    param = param * (1 - LR * WEIGHT_DECAY)
    exp_avg = exp_avg.lerp(grad, 1 - BETA1)
    exp_avg_sq = exp_avg_sq * BETA2 + grad * grad * (1 - BETA2)
    bias_correction1 = 1 - BETA1**STEP
    bias_correction2_sqrt = math.sqrt(1 - BETA2**STEP)
    denom = exp_avg_sq.sqrt() / bias_correction2_sqrt + EPS
    param = param - (LR / bias_correction1) * exp_avg / denom
    return param, exp_avg, exp_avg_sq


def make_inputs(shape, dtype, device, generator):
    (n,) = shape
    param = torch.randn(n, generator=generator, dtype=dtype, device=device)
    grad = torch.randn(n, generator=generator, dtype=dtype, device=device)
    exp_avg = 0.1 * torch.randn(n, generator=generator, dtype=dtype, device=device)
    exp_avg_sq = 0.01 * torch.rand(n, generator=generator, dtype=dtype, device=device)  # a second moment: >= 0
    return param, grad, exp_avg, exp_avg_sq


def flops(shape):
    (n,) = shape
    return 16 * n


def bytes_moved(shape, dtype):
    (n,) = shape
    return 7 * n * torch.empty((), dtype=dtype).element_size()  # four buffers read, three written
