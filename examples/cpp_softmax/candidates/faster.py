"""Faster C++ softmax: float math, one expf per element, vectorizable passes, two OpenMP threads."""

import ctypes

import torch

from kernel_agent.cpp import load_library, ptr

THREADS = 2

CPP_SOURCE = r"""
#include <math.h>
#include <omp.h>
#define ROW_BLOCK 16

extern "C" void softmax_rows(const float* x, float* y, long rows, long cols, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static, ROW_BLOCK)
    for (long r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = -INFINITY;
        #pragma omp simd reduction(max:m)
        for (long c = 0; c < cols; ++c) m = fmaxf(m, xr[c]);
        float s = 0.0f;
        for (long c = 0; c < cols; ++c) { float e = expf(xr[c] - m); yr[c] = e; s += e; }
        const float inv = 1.0f / s;
        #pragma omp simd
        for (long c = 0; c < cols; ++c) yr[c] *= inv;
    }
}
"""

LIB = load_library(CPP_SOURCE)


def kernel(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    LIB.softmax_rows(ptr(x), ptr(y), ctypes.c_long(x.shape[0]), ctypes.c_long(x.shape[1]), ctypes.c_int(THREADS))
    return y
