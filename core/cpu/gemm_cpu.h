/* The CPU backend's tile GEMMs: float32 (OpenBLAS, or oneDNN's AVX-512 SGEMM) and BF16 (oneDNN on
 * AVX512_BF16 or AMX tiles), behind one call with the precision as a parameter. */
#ifndef KNNWB_GEMM_CPU_H
#define KNNWB_GEMM_CPU_H

#include <glib.h>
#include <stddef.h>

typedef struct KnnwbCpuGemm KnnwbCpuGemm;
typedef struct KnnwbCpuGemmWorker KnnwbCpuGemmWorker;

/**
 * TRUE when a BF16 screen runs natively here: knnwb was built with oneDNN, the CPU has
 * AVX512_BF16 or AMX-BF16 (and the OS saves their registers), and oneDNN's BF16 matmul uses them.
 * KNNWB_CPU_GEMM=openblas in the environment says FALSE (and keeps every GEMM on OpenBLAS), for
 * tests and comparisons. The CPU and library are probed once per process; thread-safe.
 */
gboolean knnwb_cpu_gemm_has_bf16(void);

/**
 * GEMM tiles of block_query x block_reference rows (both > 0): query (nq x d, row-major) against
 * reference (nr x d; the same pointer and count for a self job, whose blocks must then agree) in
 * precision (KNNWB_KERNELS_SCREEN_FP32 or _BF16, which needs knnwb_cpu_gemm_has_bf16). row_norm
 * bounds the norm of every row (BF16 rows are scaled by a power of two from it, so that none loses
 * components to BF16's subnormal flush; the scale is undone exactly). BF16 keeps converted copies
 * of the rows, zero-padded to whole blocks: about 2 (nq + nr) d bytes, O((nq + nr) d) time. NULL
 * with message set on failure (memory, library).
 */
KnnwbCpuGemm *knnwb_cpu_gemm_new(int precision, const float *query, size_t nq,
                                 const float *reference, size_t nr, size_t d, size_t block_query,
                                 size_t block_reference, double row_norm, char *message,
                                 size_t message_size);
void knnwb_cpu_gemm_free(KnnwbCpuGemm *gemm);
/** What computes the tiles, for traces ("openblas sgemm", "onednn bf16 brg:avx512_core_bf16"). */
const char *knnwb_cpu_gemm_name(const KnnwbCpuGemm *gemm);

/**
 * The state one thread needs for tiles (library stream and buffers). Makes the calling thread's
 * library calls single-threaded (the backend runs one GEMM per thread). NULL when out of memory.
 */
KnnwbCpuGemmWorker *knnwb_cpu_gemm_worker_new(KnnwbCpuGemm *gemm);
void knnwb_cpu_gemm_worker_free(KnnwbCpuGemmWorker *worker);
/** The bytes knnwb_cpu_gemm_worker_new allocates for one thread (0 for a NULL gemm). O(1). */
size_t knnwb_cpu_gemm_worker_bytes(const KnnwbCpuGemm *gemm);

/**
 * out[a * block + b] = q_{q0+a} . r_{r0+b} for a < bq, b < br (q0, r0 multiples of block; bq, br
 * at most block and within the rows); out holds block x block floats, and entries past bq or br
 * are unspecified. FALSE (message set) when the library failed. O(block^2 d).
 */
gboolean knnwb_cpu_gemm_tile(KnnwbCpuGemmWorker *worker, size_t q0, size_t bq, size_t r0, size_t br,
                             float *out, char *message, size_t message_size);

#endif
