/* Per-row candidate buffers of the CPU backend's selection, and the tile scans that fill them. */
#ifndef KNNWB_SELECT_CPU_ROWS_H
#define KNNWB_SELECT_CPU_ROWS_H

#include <glib.h>
#include <stdint.h>

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

/** The k-th smallest (0 < k <= n) of values[0, n) (no NaN), which it reorders. O(n) expected. */
float knnwb_float_kth_smallest(float *values, size_t n, size_t k);

#endif
