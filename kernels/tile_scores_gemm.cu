/*
 * The score GEMM of every tile (tile_scores.h): cuBLAS SGEMM for fp32, cublasGemmEx on the tensor
 * cores for TF32 and FP16 inputs, always with float32 accumulation; float32 output, or half for
 * FP16 inputs when the tile is kept in half precision.
 */
#include "blas_library.h"
#include "tile_scores.h"

#include <cuda_fp16.h>

namespace knnwb_cuda
{

cublasStatus_t tile_scores_gemm(cublasHandle_t handle, GemmPrecision precision, const void *q,
                                int n_q, const void *r, int n_r, int dpad, float alpha, void *tile,
                                int ld, bool half_tile)
{
  const float zero = 0.0f;
  const BlasLibrary *l = blas(); /* loaded: the handle was made by it */
  if (half_tile && precision != GemmPrecision::kFp16)
    return CUBLAS_STATUS_INVALID_VALUE;
  switch (precision) {
  case GemmPrecision::kFp32:
    return l->sgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, n_r, n_q, dpad, &alpha, (const float *)r,
                    dpad, (const float *)q, dpad, &zero, (float *)tile, ld);
  case GemmPrecision::kTf32:
    return l->gemm_ex(handle, CUBLAS_OP_T, CUBLAS_OP_N, n_r, n_q, dpad, &alpha, r, CUDA_R_32F, dpad,
                      q, CUDA_R_32F, dpad, &zero, tile, CUDA_R_32F, ld,
                      CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
  case GemmPrecision::kFp16:
    return l->gemm_ex(handle, CUBLAS_OP_T, CUBLAS_OP_N, n_r, n_q, dpad, &alpha, r, CUDA_R_16F, dpad,
                      q, CUDA_R_16F, dpad, &zero, tile, half_tile ? CUDA_R_16F : CUDA_R_32F, ld,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

} // namespace knnwb_cuda
