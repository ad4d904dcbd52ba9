"""Fused C++ bias + GELU + residual + LayerNorm: one vectorized pass builds each row in the output and sums
it, two passes over that row in L1 take the variance and normalise; x and the residual cross memory once."""

import ctypes

import torch

from kernel_agent.cpp import load_library, ptr

THREADS = 2

CPP_SOURCE = r"""
// Without trapping math the clamp in erf becomes a vector blend instead of a branch that stops vectorization.
#pragma GCC optimize("no-trapping-math")
#include <math.h>
#include <omp.h>
#define ROW_BLOCK 16

// erf as a rational function of x on [-4, 4] (Eigen's and XLA's float erf, a few ulp), in plain arithmetic
// so the compiler vectorizes it (libm's erff is not vectorized without -ffast-math).
static inline float erf_float(float x) {
    x = x < 4.0f ? x : 4.0f;
    x = x > -4.0f ? x : -4.0f;
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

extern "C" void gelu_layernorm_rows(const float* __restrict x, const float* __restrict bias,
                                    const float* __restrict residual, const float* __restrict weight,
                                    const float* __restrict beta, float* __restrict y, long rows, long cols,
                                    float eps, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static, ROW_BLOCK)
    for (long r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        const float* rr = residual + r * cols;
        float* yr = y + r * cols;
        float sum = 0.0f;
        #pragma omp simd reduction(+:sum)
        for (long c = 0; c < cols; ++c) {
            const float v = xr[c] + bias[c];
            const float h = 0.5f * v * (1.0f + erf_float(v * 0.70710678118654752f)) + rr[c];
            yr[c] = h;
            sum += h;
        }
        const float mean = sum / (float)cols;
        float var = 0.0f;
        #pragma omp simd reduction(+:var)
        for (long c = 0; c < cols; ++c) var += (yr[c] - mean) * (yr[c] - mean);
        const float inv = 1.0f / sqrtf(var / (float)cols + eps);
        #pragma omp simd
        for (long c = 0; c < cols; ++c) yr[c] = (yr[c] - mean) * inv * weight[c] + beta[c];
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
