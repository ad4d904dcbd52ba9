"""Matmul whose float16 path accumulates K in float16 chunks (float32 is honest), under the problem's loose
float16 tolerance (1e-2, 5e-2) (issue 35, THREATS I9): the float64 gold sees the error of about 1 at K=2048.

ROW: I9
EXPECT: incorrect
REASON: exceed|mismatch|error|tolerance|differs
PROBLEM: examples/triton_matmul
"""

import torch


def kernel(a, b):
    if a.dtype != torch.float16:
        return a @ b
    out = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float16, device=a.device)
    for k in range(0, a.shape[1], 16):
        out += a[:, k : k + 16] @ b[k : k + 16]  # each partial sum rounded to float16
    return out
