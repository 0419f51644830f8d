/*
 * Score tiles: every GEMM of the selection backend goes through tile_scores_gemm, with the
 * screening precision as a parameter (in the manner of FAISS's rawGemm); manhattan tiles come
 * from the blocked kernel of tile_scores_l1.cu (launch_l1_tile, select_internal.h).
 */
#ifndef KNNWB_TILE_SCORES_H
#define KNNWB_TILE_SCORES_H

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stddef.h>

namespace knnwb_cuda
{

/* The arithmetic of a screening GEMM (inputs; accumulation is always float32). */
enum class GemmPrecision {
  kFp32, /* plain fp32 FMA (no TF32): the bound of core's refine, (d + 16) 2^-24 per unit */
  kTf32, /* fp32 rows, tensor cores with TF32 inputs */
  kFp16  /* fp16 rows (scaled copies), tensor cores */
};

/**
 * tile[i*ld + j] = alpha * (q_i . r_j) for i < n_q, j < n_r: column-major C = R^T x Q, so the
 * rows of queries are contiguous in the tile. q: n_q x dpad, r: n_r x dpad row-major (float, or
 * __half for kFp16), dpad a multiple of 8. The tile is float, or (half_tile, kFp16 only) __half:
 * the float32 accumulations times alpha rounded to nearest half. Runs on the handle's stream.
 * Returns cuBLAS's status.
 */
cublasStatus_t tile_scores_gemm(cublasHandle_t handle, GemmPrecision precision, const void *q,
                                int n_q, const void *r, int n_r, int dpad, float alpha, void *tile,
                                int ld, bool half_tile);

/**
 * The FP16 GEMM of full tiles (tile x tile products of dpad halves into a half tile of leading
 * dimension tile) through cuBLASLt with an algorithm timed on the device (tile_scores_lt.cu).
 * Empty (ready false) until lt_gemm_choose picks cuBLASLt; lt_gemm_destroy frees it.
 */
struct LtGemm {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t rows = nullptr, tile = nullptr;
  cublasLtMatmulAlgo_t algo = {};
  void *workspace = nullptr;
  int device = -1; /* the ordinal its handle and workspace belong to */
  bool ready = false;
};

/**
 * Times cublasGemmEx (tile_scores_gemm) and cuBLASLt's heuristic algorithms for g's shape on
 * stream, with rows (tile x dpad halves on the device) as both operands into out (a half tile),
 * and makes g ready when a cuBLASLt algorithm is the faster; the choice is kept per device and
 * shape for the process, so later runs reuse it without timing, and on disk (gemm_cache.h) for
 * later processes on the same GPU model and libraries, which take it once cuBLASLt accepts it on
 * their device (cublasLtMatmulAlgoCheck) and it ran once. KNNWB_CUDA_GEMM=ex keeps
 * cublasGemmEx, =lt takes cuBLASLt's fastest. Best effort: any failure leaves g not ready (the
 * GEMMs stay cublasGemmEx's). *ex_ms and *lt_ms get the times (0 when reused or not timed).
 * Cost: about 20 GEMMs of the tile and the loads of their kernels (0.11-0.14 s on an H200), once
 * per device and shape; from the disk, one GEMM.
 */
void lt_gemm_choose(LtGemm *g, cublasHandle_t handle, int device, int tile, int dpad, float alpha,
                    const void *rows, void *out, cudaStream_t stream, double *ex_ms, double *lt_ms);

/** Whether lt_gemm_choose has made its timed choice for device and this shape in this process. */
bool lt_gemm_known(int device, int tile, int dpad);

/** tile = alpha R^T Q as tile_scores_gemm for a full tile, with g's algorithm on stream, in g's
 * workspace or the given one (KNNWB_SELECT_LT_WORKSPACE_BYTES; two GEMMs running at once on
 * different streams must not share one). */
cublasStatus_t lt_gemm_run(const LtGemm &g, const void *q, const void *r, float alpha, void *tile,
                           cudaStream_t stream, void *workspace = nullptr);

/** Frees what g holds (nothing when empty), or gives it to a keep scope (device_keep.h): no GEMM
 * of g may still be queued. */
void lt_gemm_destroy(LtGemm *g);

/**
 * Half-precision score tiles (FP16 screening): the product of rows scaled by 2^s is at most
 * 2^28 in magnitude (each scaled row's norm is at most 2^14), so the GEMM writes it times
 * 2^kHalfTileExponent (at most about 1: no overflow, and the subnormal range starts far below the
 * scores that matter), and the selection multiplies the half by 2^(-kHalfTileExponent - 2 s),
 * exactly, to get q.r back.
 */
constexpr int kHalfTileExponent = -28;

/**
 * The power of two FP16 screening scales rows by: 14 - ceil(log2 row_norm), so that every
 * component of a row of norm at most row_norm is at most 2^14 in magnitude (half's largest finite
 * value is 65504) and components down to 2^-28 row_norm stay normal halves (relative error 2^-11;
 * below that, absolute error at most 2^-39 row_norm: the tail term of the bound in core).
 */
int screen_scale_exponent(double row_norm);

/**
 * FP16 screening rows: dst[i*dpad + j] = half(src[i*src_pitch + j] * 2^scale_exponent), rounded
 * to nearest, for i < n, j < dim; dst[i*dpad + j] = 0 for dim <= j < dpad (dpad even). One pass
 * over n * dpad elements on stream.
 */
cudaError_t launch_rows_to_half(const float *src, size_t src_pitch, size_t n, int dim, void *dst,
                                int dpad, int scale_exponent, cudaStream_t stream);

} // namespace knnwb_cuda

#endif
