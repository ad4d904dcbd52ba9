"""Naive C++ AdamW: one scalar double-precision loop per output, so the buffers cross memory three times."""

import ctypes

import torch

from kernel_agent.cpp import load_library, ptr

THREADS = 1

CPP_SOURCE = r"""
#include <math.h>
#include <omp.h>
#define CHUNK 1024

extern "C" void adamw_step(const float* p, const float* g, const float* m, const float* v,
                           float* p_out, float* m_out, float* v_out, long n, int threads) {
    const double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 1e-2;
    const int step = 10;
    #pragma omp parallel for num_threads(threads) schedule(static, CHUNK)
    for (long i = 0; i < n; ++i) m_out[i] = (float)(beta1 * m[i] + (1.0 - beta1) * g[i]);
    #pragma omp parallel for num_threads(threads) schedule(static, CHUNK)
    for (long i = 0; i < n; ++i) v_out[i] = (float)(beta2 * v[i] + (1.0 - beta2) * (double)g[i] * g[i]);
    #pragma omp parallel for num_threads(threads) schedule(static, CHUNK)
    for (long i = 0; i < n; ++i) {
        double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step);
        double denom = sqrt((double)v_out[i]) / sqrt(bc2) + eps;
        p_out[i] = (float)(p[i] * (1.0 - lr * wd) - (lr / bc1) * m_out[i] / denom);
    }
}
"""

LIB = load_library(CPP_SOURCE)


def kernel(param, grad, exp_avg, exp_avg_sq):
    args = [t.contiguous() for t in (param, grad, exp_avg, exp_avg_sq)]
    outs = [torch.empty_like(args[0]) for _ in range(3)]
    LIB.adamw_step(*map(ptr, args), *map(ptr, outs), ctypes.c_long(args[0].numel()), ctypes.c_int(THREADS))
    return tuple(outs)
