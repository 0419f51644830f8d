/* Shared by the files of the CPU select backend (core/cpu/): the tile GEMMs (gemm_cpu.c: float32
 * through OpenBLAS or oneDNN's AVX-512 SGEMM, BF16 through oneDNN on AVX512_BF16 or AMX tiles,
 * behind one call with the precision as a parameter), then the per-row candidate buffers of the
 * selection and the tile scans that fill them (select_cpu_rows.c). What other units use is in
 * cpu.h. */
#ifndef KNNWB_CPU_INTERNAL_H
#define KNNWB_CPU_INTERNAL_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>
#include "cpu/cpu.h"

/* ---- Tile GEMMs (gemm_cpu.c) -------------------------------------------------------------------
 */

typedef struct KnnwbCpuGemm KnnwbCpuGemm;
typedef struct KnnwbCpuGemmWorker KnnwbCpuGemmWorker;

/**
 * GEMM tiles of block_query x block_reference rows (both > 0): job's query rows (n_query x dim,
 * row-major) against its reference rows (the same rows for a self job, whose blocks must then
 * agree), given or derived (knnwb_select_job_rows: a worker then fills a block of each side, as
 * knnwb_cpu_gemm_worker_bytes counts), in precision (KNNWB_KERNELS_SCREEN_FP32 or _BF16, which
 * needs knnwb_cpu_gemm_has_bf16). job->screen_row_norm bounds the norm of every row (BF16 rows are
 * scaled by a power of two from it, so that none loses components to BF16's subnormal flush; the
 * scale is undone exactly). BF16 keeps converted copies of the rows, zero-padded to whole blocks:
 * about 2 (nq + nr) d bytes, O((nq + nr) d) time. job must outlive the GEMM. NULL with message set
 * on failure (memory, library).
 */
KnnwbCpuGemm *knnwb_cpu_gemm_new(int precision, const KnnwbSelectJob *job, size_t block_query,
                                 size_t block_reference, char *message, size_t message_size);
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

/* ---- Candidate buffers (select_cpu_rows.c) -----------------------------------------------------
 */

/**
 * Every query row keeps up to cap = kc + margin (score, reference) pairs; a score is appended
 * when it is below the row's threshold, and a full buffer is cut to its kc smallest
 * (quickselect), which sets the threshold to the kc-th. The threshold only falls, and whatever is
 * not appended is at least the kc-th smallest of what was, so the kc kept at the end are the kc
 * smallest offered (ties: any of the tied). Appending costs two stores; a cut O(cap), once per
 * margin appends. Callers serialise access to a row (select_cpu.c locks its block).
 */
typedef struct {
  size_t n, kc, cap;
  float *score;     /* n x cap */
  int32_t *index;   /* n x cap: reference rows below 2^31 */
  int32_t *count;   /* n */
  float *threshold; /* n: +inf (or the caller's starting bound) until the first cut */
} KnnwbCandidateRows;

/** How raw tile values (dot products, or scores already) become scores. */
typedef enum {
  KNNWB_TILE_SCORES,  /* the tile holds scores (L1, or after masking) */
  KNNWB_TILE_DOT,     /* 1 - g */
  KNNWB_TILE_ABS_DOT, /* 1 - |g| */
  KNNWB_TILE_L2       /* |r|^2 - 2 g, |r| of the row whose list it joins */
} KnnwbTileKind;

/** Buffers for n rows of kc; the margin from kc and a memory allowance (seeded: the rows will
 * start from bounds the caller sets, so few pairs are appended and a smaller margin keeps the
 * buffers' pages few). FALSE when out of memory (nothing allocated). O(n) time, n (kc + margin) 8
 * bytes. */
gboolean knnwb_candidate_rows_init(KnnwbCandidateRows *rows, size_t n, size_t kc, gboolean seeded);
void knnwb_candidate_rows_clear(KnnwbCandidateRows *rows);

/**
 * Offers tile (bq x br values, row stride ld) of query rows [q0, q0 + bq) x reference rows [r0,
 * r0 + br) to the query rows (scores by kind; sqnorms: the reference rows' squared norms, L2 only).
 * NaN values are never appended (masked pairs). scratch: rows->cap floats of the calling thread's
 * own. O(bq br) plus the appends.
 */
void knnwb_candidate_rows_scan_rows(KnnwbCandidateRows *rows, float *scratch, const float *tile,
                                    size_t ld, size_t q0, size_t bq, size_t r0, size_t br,
                                    KnnwbTileKind kind, const float *sqnorms);

/** The same tile seen from its reference rows (self jobs: they are query rows too): value (a, b)
 * is offered to list r0 + b (a two-sided job passes its reference rows' first list) as pair q0 +
 * a; L2 scores take the query rows' squared norms (sqnorms[q0 + a]). */
void knnwb_candidate_rows_scan_columns(KnnwbCandidateRows *rows, float *scratch, const float *tile,
                                       size_t ld, size_t q0, size_t bq, size_t r0, size_t br,
                                       KnnwbTileKind kind, const float *sqnorms);

/** Rows [first, last): their kc best into out_index/out_score at row i - out_row0 (kc per row,
 * any order), -1 and +inf past what a row received. O(cap) per row. */
void knnwb_candidate_rows_finish(KnnwbCandidateRows *rows, size_t first, size_t last,
                                 size_t out_row0, int64_t *out_index, float *out_score);

#endif
