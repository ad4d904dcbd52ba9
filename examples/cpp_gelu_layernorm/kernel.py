"""Naive C++ bias + GELU + residual + LayerNorm: scalar, four passes per row, double-precision erf, one thread."""

import ctypes

import torch

from kernel_agent.cpp import load_library, ptr

THREADS = 1

CPP_SOURCE = r"""
#include <math.h>
#include <omp.h>
#define ROW_BLOCK 1

extern "C" void gelu_layernorm_rows(const float* x, const float* bias, const float* residual, const float* weight,
                                    const float* beta, float* y, long rows, long cols, float eps, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static, ROW_BLOCK)
    for (long r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        const float* rr = residual + r * cols;
        float* yr = y + r * cols;
        for (long c = 0; c < cols; ++c) {
            double v = (double)xr[c] + bias[c];
            yr[c] = (float)(0.5 * v * (1.0 + erf(v / sqrt(2.0))) + rr[c]);
        }
        double mean = 0.0;
        for (long c = 0; c < cols; ++c) mean += yr[c];
        mean /= cols;
        double var = 0.0;
        for (long c = 0; c < cols; ++c) var += (yr[c] - mean) * (yr[c] - mean);
        var /= cols;
        const double inv = 1.0 / sqrt(var + eps);
        for (long c = 0; c < cols; ++c) yr[c] = (float)((yr[c] - mean) * inv * weight[c] + beta[c]);
    }
}
"""

LIB = load_library(CPP_SOURCE)
EPS = 1e-5


def kernel(x, bias, residual, weight, beta):
    x, bias, residual, weight, beta = (t.contiguous() for t in (x, bias, residual, weight, beta))
    y = torch.empty_like(x)
    LIB.gelu_layernorm_rows(
        ptr(x),
        ptr(bias),
        ptr(residual),
        ptr(weight),
        ptr(beta),
        ptr(y),
        ctypes.c_long(x.shape[0]),
        ctypes.c_long(x.shape[1]),
        ctypes.c_float(EPS),
        ctypes.c_int(THREADS),
    )
    return y
