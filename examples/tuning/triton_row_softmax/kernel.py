"""Triton row softmax, the tuning family's baseline: one program per row, three passes (max, sum, write)."""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 128
NUM_WARPS = 4


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    # Pass 1: running maximum.
    m_vec = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
        m_vec = tl.maximum(m_vec, x)
    m = tl.max(m_vec, axis=0)
    # Pass 2: sum of exponentials.
    s_vec = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < cols, other=-float("inf")).to(tl.float32)
        s_vec += tl.exp(x - m)
    s = tl.sum(s_vec, axis=0)
    # Pass 3: normalize and write.
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        x = tl.load(x_row + offs, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m) / s
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def kernel(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    rows, cols = x.shape
    _softmax_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)
    return y
