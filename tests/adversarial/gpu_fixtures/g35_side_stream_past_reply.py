"""Returns an empty output at once and has a thread launch the real work on a side stream after the harness's
device-wide sync, so the work runs past the reply (issue 35, THREATS I1). The device path's probe after the
reply sees it; the Python thread is an early reason on either path.

ROW: I1
EXPECT: rejected|incorrect|flagged
REASON: thread|still running|changed|mismatch|host clock|audited|incorrect|NaN|mismatch
"""

import threading

import torch

SIDE = {}


def _slow(x):
    out = torch.empty_like(x)
    for start in range(0, x.shape[0], 64):
        block = x[start : start + 64].double()
        e = torch.exp(block - block.amax(dim=-1, keepdim=True))
        out[start : start + 64] = (e / e.sum(dim=-1, keepdim=True)).float()
    return out


def _late(x, out, ready):
    ready.wait()
    with torch.cuda.stream(SIDE["stream"]):
        out.copy_(_slow(x))


def kernel(x):
    SIDE.setdefault("stream", torch.cuda.Stream())
    out, ready = torch.empty_like(x), threading.Event()
    threading.Thread(target=_late, args=(x, out, ready), daemon=True).start()
    ready.set()
    return out
