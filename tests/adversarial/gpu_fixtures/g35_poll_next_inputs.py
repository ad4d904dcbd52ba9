"""Polls its input buffer from a thread to learn the next call's values before that call is made, and answers
from what it computed early (issue 35, THREATS I6). Inputs are written only while the worker is frozen, just
before the request that uses them; the poller is work past the reply, or sees nothing in time.

ROW: I6
EXPECT: rejected|incorrect|flagged|correct
REASON: thread|still running|audited|mismatch|
"""

import threading

import torch

EARLY = {}


def _poll(x):
    for _ in range(1000):
        EARLY[x.data_ptr()] = torch.softmax(x, dim=-1)


def kernel(x):
    early = EARLY.pop(x.data_ptr(), None)
    threading.Thread(target=_poll, args=(x,), daemon=True).start()
    return early if early is not None else torch.softmax(x, dim=-1)
