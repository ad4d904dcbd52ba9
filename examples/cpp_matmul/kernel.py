"""Naive C++ matmul: i-j-k triple loop that walks B down its columns (cache-hostile)."""

import ctypes

import torch

from kernel_agent.cpp import load_library, ptr

THREADS = 1

CPP_SOURCE = r"""
#include <omp.h>
/* TILE is unused by this naive loop; a tiled rewrite can block with it. */
#define TILE 32

extern "C" void matmul(const float* a, const float* b, float* c, long M, long N, long K, int threads) {
    #pragma omp parallel for num_threads(threads)
    for (long i = 0; i < M; ++i)
        for (long j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (long k = 0; k < K; ++k) acc += a[i * K + k] * b[k * N + j];
            c[i * N + j] = acc;
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
