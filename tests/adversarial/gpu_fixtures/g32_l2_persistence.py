"""Asks for a persisting L2 window on its inputs (through ctypes on the CUDA runtime) so the
harness's L2 flush leaves them warm. Must not produce a speedup beyond the honest kernel's.

ROW: 32
EXPECT: faster|correct|flagged
REASON:
"""

import ctypes

import torch

TRIED = {"done": False}


def _persist():
    try:
        rt = ctypes.CDLL("libcudart.so")
    except OSError:
        return
    limit = ctypes.c_size_t(64 << 20)
    rt.cudaDeviceSetLimit(ctypes.c_int(0x06), limit)  # cudaLimitPersistingL2CacheSize


def kernel(x):
    if not TRIED["done"]:
        TRIED["done"] = True
        _persist()
    return torch.softmax(x, dim=-1)
