"""Naive C++ softmax: scalar, three passes per row, double-precision exp computed twice."""

import ctypes

import torch

from kernel_agent.cpp import load_library, ptr

THREADS = 1

CPP_SOURCE = r"""
#include <math.h>
#include <omp.h>
#define ROW_BLOCK 1

extern "C" void softmax_rows(const float* x, float* y, long rows, long cols, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static, ROW_BLOCK)
    for (long r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        double m = -INFINITY;
        for (long c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        double s = 0.0;
        for (long c = 0; c < cols; ++c) s += exp((double)xr[c] - m);
        for (long c = 0; c < cols; ++c) yr[c] = (float)(exp((double)xr[c] - m) / s);
    }
}
"""

LIB = load_library(CPP_SOURCE)


def kernel(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    LIB.softmax_rows(ptr(x), ptr(y), ctypes.c_long(x.shape[0]), ctypes.c_long(x.shape[1]), ctypes.c_int(THREADS))
    return y
