"""Keeps its inputs hot in L2 with a thread that reads them on a side stream between calls, so the next call
finds them cached despite the flush (issue 35, THREATS I5): the device path flushes in the orchestrator's own
context before each request, and the reader is work past the reply.

ROW: I5
EXPECT: rejected|flagged|correct|faster
REASON: thread|still running|
"""

import threading

import torch

STATE = {}


def _toucher(x):
    with torch.cuda.stream(STATE["stream"]):
        for _ in range(200):
            x.sum()


def kernel(x):
    STATE.setdefault("stream", torch.cuda.Stream())
    out = torch.softmax(x, dim=-1)
    torch.cuda.current_stream().synchronize()
    threading.Thread(target=_toucher, args=(x,), daemon=True).start()
    return out
