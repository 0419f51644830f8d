/*
 * Device memory and cuBLAS/cuBLASLt handles kept from one search to the next while a caller has
 * opened a keep scope (knnwb_cuda_keep_begin, knnwb_kernels.h). Why: a partitioned run makes
 * dozens of sub-searches of a few hundred thousand rows, several at once on each GPU, and each
 * one's setup and release (about twenty cudaMalloc and cudaFree calls, cublasCreate,
 * cublasLtCreate and their destruction) cost more than its tiles on two GPUs; cudaFree and
 * cublasDestroy also wait for the whole device, that is for the other sub-searches' tiles.
 * Outside a scope every call allocates and frees as CUDA does.
 *
 * Used by the select backend's workers (worker_setup.cu) and the tile GEMM (tile_scores_lt.cu).
 * Every function is thread-safe. The caller makes `ordinal` the current device first.
 */
#ifndef KNNWB_DEVICE_KEEP_H
#define KNNWB_DEVICE_KEEP_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stddef.h>

namespace knnwb_cuda
{

/**
 * At least `bytes` of device memory on GPU ordinal: a kept block that fits (at most a quarter
 * larger, so small requests do not take large blocks), else cudaMalloc's; when that fails, the
 * device's kept blocks are freed and cudaMalloc tried once more. Returns cudaMalloc's status
 * (*p NULL on failure). O(kept blocks).
 */
cudaError_t keep_malloc(int ordinal, void **p, size_t bytes);

/**
 * Gives back a block of keep_malloc (NULL is ignored). Nothing queued on any stream may still use
 * it: the caller has synchronised the streams that did. Kept inside a scope, else freed (cudaFree,
 * which waits for the device).
 */
void keep_free(int ordinal, void *p);

/** Bytes of device memory on GPU ordinal kept for reuse (free for this process's searches). */
size_t keep_bytes(int ordinal);

/** A cuBLAS handle on GPU ordinal: a kept one, else cublasCreate's. */
cublasStatus_t keep_blas_take(int ordinal, cublasHandle_t *handle);

/** Gives back a handle of keep_blas_take (NULL ignored): kept inside a scope, else destroyed. */
void keep_blas_give(int ordinal, cublasHandle_t handle);

/** A cuBLASLt handle on GPU ordinal: a kept one, else cublasLtCreate's. */
cublasStatus_t keep_lt_take(int ordinal, cublasLtHandle_t *handle);

/** Gives back a handle of keep_lt_take (NULL ignored): kept inside a scope, else destroyed. */
void keep_lt_give(int ordinal, cublasLtHandle_t handle);

} // namespace knnwb_cuda

#endif
