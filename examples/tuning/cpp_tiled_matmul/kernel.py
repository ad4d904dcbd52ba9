"""Tiled C++ matmul: OpenMP over (row tile, column tile) pairs; tile sizes and the loop order are tunables.

ORDER 0 walks K tiles outside the rows of a tile (each B tile reused across TILE_M rows); ORDER 1 walks
the rows outside the K tiles (each A row reused across the whole K range). A tile grid smaller than
the thread count leaves threads idle, so skinny shapes want small tiles along their short side.
"""

import ctypes

import torch

from kernel_agent.cpp import load_library, ptr

CPP_SOURCE = r"""
#include <omp.h>
#define TILE_M 32
#define TILE_N 128
#define TILE_K 256
#define ORDER 0

static inline long lmin(long a, long b) { return a < b ? a : b; }

extern "C" void matmul(const float* a, const float* b, float* c, long M, long N, long K) {
    long tm = (M + TILE_M - 1) / TILE_M, tn = (N + TILE_N - 1) / TILE_N;
    #pragma omp parallel for collapse(2) schedule(static)
    for (long ti = 0; ti < tm; ++ti)
        for (long tj = 0; tj < tn; ++tj) {
            long i0 = ti * TILE_M, i1 = lmin(i0 + TILE_M, M);
            long j0 = tj * TILE_N, j1 = lmin(j0 + TILE_N, N);
            for (long i = i0; i < i1; ++i)
                for (long j = j0; j < j1; ++j) c[i * N + j] = 0.0f;
#if ORDER == 0
            for (long k0 = 0; k0 < K; k0 += TILE_K) {
                long k1 = lmin(k0 + TILE_K, K);
                for (long i = i0; i < i1; ++i)
                    for (long k = k0; k < k1; ++k) {
                        float aik = a[i * K + k];
                        const float* brow = b + k * N;
                        float* crow = c + i * N;
                        #pragma omp simd
                        for (long j = j0; j < j1; ++j) crow[j] += aik * brow[j];
                    }
            }
#else
            for (long i = i0; i < i1; ++i)
                for (long k0 = 0; k0 < K; k0 += TILE_K) {
                    long k1 = lmin(k0 + TILE_K, K);
                    for (long k = k0; k < k1; ++k) {
                        float aik = a[i * K + k];
                        const float* brow = b + k * N;
                        float* crow = c + i * N;
                        #pragma omp simd
                        for (long j = j0; j < j1; ++j) crow[j] += aik * brow[j];
                    }
                }
#endif
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
    LIB.matmul(ptr(a), ptr(b), ptr(c), ctypes.c_long(M), ctypes.c_long(N), ctypes.c_long(K))
    return c
