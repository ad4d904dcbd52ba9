"""Tuned Triton row sum: the baseline with BLOCK_SIZE 1024 and 8 warps."""

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 8


@triton.jit
def _rowsum_kernel(x_ptr, y_ptr, cols, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride_x + offs, mask=offs < cols, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0).to(y_ptr.dtype.element_ty))


def kernel(x):
    x = x.contiguous()
    rows, cols = x.shape
    y = torch.empty(rows, dtype=x.dtype, device=x.device)
    _rowsum_kernel[(rows,)](x, y, cols, x.stride(0), BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)
    return y
