"""Naive C++ bias + GELU + residual + LayerNorm: one scalar loop per op, double sums, two threads."""

import ctypes

import torch

from kernel_agent.cpp import load_library, ptr

# As many threads as the fused candidate: with one, it measured 12.6x on a quiet 2-core machine (past the
# 10x review bound).
THREADS = 2

CPP_SOURCE = r"""
#include <math.h>
#include <omp.h>
#define ROW_BLOCK 1

// erf as a rational function of x on [-4, 4] (Eigen's and XLA's float erf, a few ulp); libm's erff is slower.
static float erf_float(float x) {
    if (x > 4.0f) x = 4.0f;
    if (x < -4.0f) x = -4.0f;
    const float x2 = x * x;
    float p = -2.72614225801306e-10f;
    p = p * x2 + 2.77068142495902e-08f;
    p = p * x2 - 2.10102402082508e-06f;
    p = p * x2 - 5.69250639462346e-05f;
    p = p * x2 - 7.34990630326855e-04f;
    p = p * x2 - 2.95459980854025e-03f;
    p = p * x2 - 1.60960333262415e-02f;
    float q = -1.45660718464996e-05f;
    q = q * x2 - 2.13374055278905e-04f;
    q = q * x2 - 1.68282697438203e-03f;
    q = q * x2 - 7.37332916720468e-03f;
    q = q * x2 - 1.42647390514189e-02f;
    return x * p / q;
}

extern "C" void gelu_layernorm_rows(const float* x, const float* bias, const float* residual, const float* weight,
                                    const float* beta, float* y, long rows, long cols, float eps, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static, ROW_BLOCK)
    for (long r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        const float* rr = residual + r * cols;
        float* yr = y + r * cols;
        for (long c = 0; c < cols; ++c) yr[c] = xr[c] + bias[c];
        for (long c = 0; c < cols; ++c) yr[c] = 0.5f * yr[c] * (1.0f + erf_float(yr[c] * 0.70710678118654752f));
        for (long c = 0; c < cols; ++c) yr[c] += rr[c];
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
