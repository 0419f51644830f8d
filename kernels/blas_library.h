/*
 * cuBLAS and cuBLASLt, loaded at run time (blas_library.cu) instead of linked: a linked cuBLASLt
 * runs its static initialisers before main, 0.06-0.08 s of every command of a CUDA build, GPU or
 * not. Loaded on a helper thread of the GPUs' start (knnwb_cuda_start, device_start.cu), they
 * meet the first GEMM ready. Every call of knnwb's into either library goes through blas().
 * Internal to kernels/.
 */
#ifndef KNNWB_BLAS_LIBRARY_H
#define KNNWB_BLAS_LIBRARY_H

#include <cublasLt.h>
#include <cublas_v2.h>

namespace knnwb_cuda
{

/* cublasGemmEx as the library exports it (the header adds a C++ overload that takes a
 * cudaDataType compute type) */
using BlasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                      int, int, const void *, const void *, cudaDataType, int,
                                      const void *, cudaDataType, int, const void *, void *,
                                      cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

/** The libraries' functions knnwb calls, with the headers' own types. */
struct BlasLibrary {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(static_cast<BlasGemmEx>(&cublasGemmEx)) gemm_ex;
  decltype(&cublasGetStatusString) status_string;
  decltype(&cublasLtCreate) lt_create;
  decltype(&cublasLtDestroy) lt_destroy;
  decltype(&cublasLtGetVersion) lt_version;
  decltype(&cublasLtMatmulDescCreate) lt_desc_create;
  decltype(&cublasLtMatmulDescSetAttribute) lt_desc_set;
  decltype(&cublasLtMatmulDescDestroy) lt_desc_destroy;
  decltype(&cublasLtMatrixLayoutCreate) lt_layout_create;
  decltype(&cublasLtMatrixLayoutDestroy) lt_layout_destroy;
  decltype(&cublasLtMatmulPreferenceCreate) lt_preference_create;
  decltype(&cublasLtMatmulPreferenceSetAttribute) lt_preference_set;
  decltype(&cublasLtMatmulPreferenceDestroy) lt_preference_destroy;
  decltype(&cublasLtMatmulAlgoGetHeuristic) lt_heuristic;
  decltype(&cublasLtMatmulAlgoCheck) lt_algo_check;
  decltype(&cublasLtMatmul) lt_matmul;
};

/**
 * The libraries, loaded by the first call (which waits for a load under way): NULL when either
 * cannot be loaded or lacks a function, and then blas_error() says why. Thread-safe.
 */
const BlasLibrary *blas();

/** Why blas() is NULL ("" when it is not). */
const char *blas_error();

/** cuBLAS's name of a status, or what kept the library from loading. */
const char *blas_status_string(cublasStatus_t status);

} // namespace knnwb_cuda

#endif
