"""Faster C++ matmul: i-k-j order over TILE x TILE blocks (contiguous, vectorizable rows), two threads."""

import ctypes

import torch

from kernel_agent.cpp import load_library, ptr

THREADS = 2

CPP_SOURCE = r"""
#include <omp.h>
#define TILE 64

extern "C" void matmul(const float* a, const float* b, float* c, long M, long N, long K, int threads) {
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (long i0 = 0; i0 < M; i0 += TILE) {
        const long i1 = i0 + TILE < M ? i0 + TILE : M;
        for (long i = i0; i < i1; ++i)
            for (long j = 0; j < N; ++j) c[i * N + j] = 0.0f;
        for (long k0 = 0; k0 < K; k0 += TILE) {
            const long k1 = k0 + TILE < K ? k0 + TILE : K;
            for (long j0 = 0; j0 < N; j0 += TILE) {
                const long j1 = j0 + TILE < N ? j0 + TILE : N;
                for (long i = i0; i < i1; ++i) {
                    float* __restrict__ ci = c + i * N;
                    for (long k = k0; k < k1; ++k) {
                        const float aik = a[i * K + k];
                        const float* __restrict__ bk = b + k * N;
                        #pragma omp simd
                        for (long j = j0; j < j1; ++j) ci[j] += aik * bk[j];
                    }
                }
            }
        }
    }
}
"""

LIB = load_library(CPP_SOURCE)


def kernel(a, b):
    a = a.contiguous()
    b = b.contiguous()
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    LIB.matmul(ptr(a), ptr(b), ptr(c), ctypes.c_long(M), ctypes.c_long(N), ctypes.c_long(K), ctypes.c_int(THREADS))
    return c
