"""Asks for a persisting L2 window on its inputs (through ctypes on the CUDA runtime) so the
harness's L2 flush leaves them warm. Must not produce a speedup beyond the honest kernel's. The static check
refuses it for importing ctypes (seen on the H200, 2026-12-04); past that, the trusted flush and persisting-L2
reset of the device path (DESIGN.md section 18) leave it nothing.

ROW: 32
EXPECT: rejected|faster|correct|flagged
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
