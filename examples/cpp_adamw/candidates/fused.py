"""Fused C++ AdamW: one vectorizable float pass that reads each input once and writes each output once."""

import ctypes

import torch

from kernel_agent.cpp import load_library, ptr

THREADS = 2

CPP_SOURCE = r"""
#include <math.h>
#include <omp.h>
#define CHUNK 16384

extern "C" void adamw_step(const float* __restrict p, const float* __restrict g, const float* __restrict m,
                           const float* __restrict v, float* __restrict p_out, float* __restrict m_out,
                           float* __restrict v_out, long n, int threads) {
    // Constants in double, then rounded once to float, as torch passes Python scalars.
    const double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, wd = 1e-2, bc1 = 1.0 - pow(beta1, 10);
    const float decay = (float)(1.0 - lr * wd), step_size = (float)(lr / bc1), eps = 1e-8f;
    const float w1 = (float)(1.0 - beta1), b2 = (float)beta2, w2 = (float)(1.0 - beta2);
    const float bc2_sqrt = (float)sqrt(1.0 - pow(beta2, 10));
    const long blocks = (n + CHUNK - 1) / CHUNK;
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (long b = 0; b < blocks; ++b) {
        const long end = (b + 1) * CHUNK < n ? (b + 1) * CHUNK : n;
        #pragma omp simd
        for (long i = b * CHUNK; i < end; ++i) {
            const float gi = g[i];
            const float mi = m[i] + w1 * (gi - m[i]);
            const float vi = v[i] * b2 + gi * gi * w2;
            const float denom = sqrtf(vi) / bc2_sqrt + eps;
            m_out[i] = mi;
            v_out[i] = vi;
            p_out[i] = p[i] * decay - step_size * mi / denom;
        }
    }
}
"""

LIB = load_library(CPP_SOURCE)


def kernel(param, grad, exp_avg, exp_avg_sq):
    args = [t.contiguous() for t in (param, grad, exp_avg, exp_avg_sq)]
    outs = [torch.empty_like(args[0]) for _ in range(3)]
    LIB.adamw_step(*map(ptr, args), *map(ptr, outs), ctypes.c_long(args[0].numel()), ctypes.c_int(THREADS))
    return tuple(outs)
