"""Fused C++ AdamW: one vectorizable float pass that reads each input once and writes each output once."""

import ctypes

import torch

from kernel_agent.cpp import load_library, ptr

THREADS = 2

CPP_SOURCE = r"""
#include <math.h>
#include <omp.h>
#define CHUNK 16384

// Eight lanes as a GCC vector type (loads and stores at float alignment): plain operators, no calls.
typedef float v8 __attribute__((vector_size(32), aligned(4)));
#ifdef __AVX__
// The compiler keeps sqrtf scalar (errno for negative inputs) unless -fno-math-errno is on the command line,
// so the eight-lane square root is the builtin, declared nothrow: in C++ a target builtin inside an OpenMP
// region otherwise pulls in the C++ runtime's exception personality, which a plain gcc link does not bring.
__attribute__((nothrow, always_inline)) static inline v8 sqrt8(v8 x) { return __builtin_ia32_sqrtps256(x); }
#endif

extern "C" void adamw_step(const float* p, const float* g, const float* m, const float* v, float* p_out,
                           float* m_out, float* v_out, long n, int threads) {
    // Constants in double, then rounded once to float, as torch passes Python scalars.
    const double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, wd = 1e-2;
    const float decay = (float)(1.0 - lr * wd), step_size = (float)(lr / (1.0 - pow(beta1, 10))), eps = 1e-8f;
    const float w1 = (float)(1.0 - beta1), b2 = (float)beta2, w2 = (float)(1.0 - beta2);
    const float bc2_sqrt = (float)sqrt(1.0 - pow(beta2, 10));
    const long blocks = (n + CHUNK - 1) / CHUNK;
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (long b = 0; b < blocks; ++b) {
        const long end = (b + 1) * CHUNK < n ? (b + 1) * CHUNK : n;
        long i = b * CHUNK;
#ifdef __AVX__
        for (; i + 8 <= end; i += 8) {
            const v8 gi = *(const v8*)(g + i), mo = *(const v8*)(m + i);
            const v8 mi = mo + w1 * (gi - mo);
            const v8 vi = *(const v8*)(v + i) * b2 + gi * gi * w2;
            *(v8*)(m_out + i) = mi;
            *(v8*)(v_out + i) = vi;
            *(v8*)(p_out + i) = *(const v8*)(p + i) * decay - step_size * mi / (sqrt8(vi) / bc2_sqrt + eps);
        }
#endif
        for (; i < end; ++i) {
            const float mi = m[i] + w1 * (g[i] - m[i]);
            const float vi = v[i] * b2 + g[i] * g[i] * w2;
            m_out[i] = mi;
            v_out[i] = vi;
            p_out[i] = p[i] * decay - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
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
