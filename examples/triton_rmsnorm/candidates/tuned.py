"""Tuned Triton RMSNorm: the baseline with BLOCK_SIZE 1024 and 8 warps."""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 8
EPS = 1e-6


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, cols, stride_x, stride_y, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    # Pass 1: sum of squares.
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < cols, other=0.0).to(tl.float32)
        acc += x * x
    inv_rms = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / cols + eps)
    # Pass 2: scale, multiply by the weight, write.
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + offs, (x * inv_rms * w).to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x, w):
    x = x.contiguous()
    w = w.contiguous()
    y = torch.empty_like(x)
    rows, cols = x.shape
    _rmsnorm_kernel[(rows,)](x, w, y, cols, x.stride(0), y.stride(0), EPS, BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)
    return y
