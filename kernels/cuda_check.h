/*
 * Turning CUDA and cuBLAS failures into the launchers' KNNWB_KERNELS_* statuses, shared by every
 * host-side file of kernels/ (the selection backend and boruvka.cu). An out-of-memory failure maps
 * to KNNWB_KERNELS_OUT_OF_MEMORY, so that callers can retry with a smaller plan; everything else
 * to KNNWB_KERNELS_ERROR. Never aborts.
 */
#ifndef KNNWB_CUDA_CHECK_H
#define KNNWB_CUDA_CHECK_H

#include <knnwb_kernels.h>

#include "blas_library.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>

static inline int knnwb_cuda_status_of(cudaError_t err)
{
  return err == cudaErrorMemoryAllocation ? KNNWB_KERNELS_OUT_OF_MEMORY : KNNWB_KERNELS_ERROR;
}

static inline int knnwb_cublas_status_of(cublasStatus_t st)
{
  return st == CUBLAS_STATUS_ALLOC_FAILED ? KNNWB_KERNELS_OUT_OF_MEMORY : KNNWB_KERNELS_ERROR;
}

/*
 * In a function returning a KNNWB_KERNELS_* status with char *message, size_t message_size in
 * scope: on failure writes "<call> failed: <reason>" and returns the status.
 */
#define KNNWB_CUDA_CHECK_STATUS(call)                                                              \
  do {                                                                                             \
    cudaError_t knnwb_err_ = (call);                                                               \
    if (knnwb_err_ != cudaSuccess) {                                                               \
      snprintf(message, message_size, "%s failed: %s", #call, cudaGetErrorString(knnwb_err_));     \
      return knnwb_cuda_status_of(knnwb_err_);                                                     \
    }                                                                                              \
  } while (0)

/*
 * In a member of a selection worker (kernels/select_worker.h: run_ and device_ordinal_ in scope):
 * on failure records the error in the run, which stops every worker, and returns false.
 */
#define CUDA_TRY(run, call)                                                                        \
  do {                                                                                             \
    cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess) {                                                                     \
      (run).fail(knnwb_cuda_status_of(err_), "%s failed on GPU %d: %s (%s)", #call,                \
                 device_ordinal_, cudaGetErrorName(err_), cudaGetErrorString(err_));               \
      return false;                                                                                \
    }                                                                                              \
  } while (0)

#define CUBLAS_TRY(run, call)                                                                      \
  do {                                                                                             \
    cublasStatus_t st_ = (call);                                                                   \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                            \
      (run).fail(knnwb_cublas_status_of(st_), "%s failed on GPU %d: %s", #call, device_ordinal_,   \
                 knnwb_cuda::blas_status_string(st_));                                             \
      return false;                                                                                \
    }                                                                                              \
  } while (0)

#endif
