"""Captures the real work as a CUDA graph, returns the graph's (stale) output buffer, and has a thread replay
the graph after the reply (issue 35, THREATS I2): the output is finished outside the clock.

ROW: I2
EXPECT: rejected|incorrect|flagged
REASON: thread|still running|changed|audited|mismatch|host clock|incorrect|NaN
"""

import threading

import torch

GRAPHS = {}


def _slow(x):
    out = torch.empty_like(x)
    for start in range(0, x.shape[0], 64):
        block = x[start : start + 64].double()
        e = torch.exp(block - block.amax(dim=-1, keepdim=True))
        out[start : start + 64] = (e / e.sum(dim=-1, keepdim=True)).float()
    return out


def _graph(x):
    key = (tuple(x.shape), x.data_ptr())
    if key not in GRAPHS:
        static = torch.empty_like(x)
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            static.copy_(_slow(x))
        GRAPHS[key] = (graph, static)
    return GRAPHS[key]


def kernel(x):
    graph, static = _graph(x)
    threading.Thread(target=graph.replay, daemon=True).start()
    return static
