"""Naive relu(A @ B + bias): a small-block matmul into an fp32 buffer, then a second epilogue kernel."""

import torch
import triton
import triton.language as tl

BLOCK_M = 16
BLOCK_N = 16
BLOCK_K = 16
NUM_WARPS = 4
NUM_STAGES = 1
EPILOGUE_BLOCK = 128


@triton.jit
def _matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr
):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + rk
        a = tl.load(
            a_ptr + rm[:, None] * sam + ks[None, :] * sak, mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0
        )
        b = tl.load(
            b_ptr + ks[:, None] * sbk + rn[None, :] * sbn, mask=(ks[:, None] < K) & (rn[None, :] < N), other=0.0
        )
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _bias_relu_kernel(c_ptr, bias_ptr, y_ptr, total, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    c = tl.load(c_ptr + offs, mask=mask, other=0.0)
    bias = tl.load(bias_ptr + offs % N, mask=mask, other=0.0).to(tl.float32)
    y = tl.maximum(c + bias, 0.0)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def kernel(a, b, bias):
    M, K = a.shape
    N = b.shape[1]
    bias = bias.contiguous()
    c = torch.empty((M, N), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _matmul_kernel[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        BM=BLOCK_M,
        BN=BLOCK_N,
        BK=BLOCK_K,
        num_warps=NUM_WARPS,
        num_stages=NUM_STAGES,
    )
    y = torch.empty((M, N), dtype=a.dtype, device=a.device)
    total = M * N
    _bias_relu_kernel[(triton.cdiv(total, EPILOGUE_BLOCK),)](
        c, bias, y, total, N, BLOCK=EPILOGUE_BLOCK, num_warps=NUM_WARPS
    )
    return y
