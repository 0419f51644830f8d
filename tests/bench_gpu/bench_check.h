/*
 * The GPU benchmarks' checks of CUDA and cuBLAS calls: a failure prints the call and its reason
 * and ends the program (exit status 1). A benchmark has nothing to recover, unlike kernels/, whose
 * launchers turn failures into statuses (kernels/cuda_check.h).
 */
#ifndef KNNWB_BENCH_CHECK_H
#define KNNWB_BENCH_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>

#define CHECK_CUDA(call)                                                                           \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));                           \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define CHECK_BLAS(call)                                                                           \
  do {                                                                                             \
    cublasStatus_t s_ = (call);                                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      fprintf(stderr, "%s failed: %d\n", #call, (int)s_);                                          \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

#endif
