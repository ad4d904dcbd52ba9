"""A Triton kernel that spins on a flag nothing sets: it hangs the device (issue 35, THREATS I10). The verdict
is `timeout`, and the runner evaluates the honest control again after it: the next evaluation must still work.

ROW: I10
EXPECT: timeout
REASON: no answer|timeout|within
OPTIONS: timeout=30
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _spin(flag_ptr, out_ptr):
    while tl.load(flag_ptr, volatile=True) == 0:
        pass
    tl.store(out_ptr, 1.0)


def kernel(x):
    flag = torch.zeros(1, dtype=torch.int32, device=x.device)
    out = torch.softmax(x, dim=-1)
    _spin[(1,)](flag, out)
    return out
