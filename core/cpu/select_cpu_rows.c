/*
 * Per-row candidate buffers and the tile scans of the CPU backend (declared in cpu_internal.h).
 *
 * A scan turns the GEMM's raw values into scores in registers (1 - g, 1 - |g|, |r|^2 - 2 g: the
 * same IEEE operations as the scalar code, no contraction, so both give the same bits) and
 * compares 16 at a time (AVX-512) or 8 (AVX2) with the threshold(s); only the rare values below it
 * leave the vector unit. The heap this replaces cost a sift per offer, which at k = 4096 was most
 * of the selection and at k = 20 as much as the GEMM once the GEMM ran in BF16.
 */
#include <math.h>
#include <string.h>
#include "cpu/cpu_internal.h"
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* the AVX-512 and AVX2 scans, built for those targets and chosen at run time */
#define KNNWB_SCAN_X86 1
#endif

gboolean knnwb_candidate_rows_init(KnnwbCandidateRows *rows, size_t n, size_t kc, gboolean seeded)
{
  memset(rows, 0, sizeof *rows);
  /* A margin of 4 kc (at least 64) makes a cut cost about 1.25 passes per appended pair; lists
   * past 512 MiB get a smaller one (at least kc / 4), which cuts more often. Rows that start from
   * a bound append only what beats what they already hold elsewhere (in a split run's later steps,
   * a few pairs a row): a margin of kc (at least 32) rarely fills, and the buffers touch fewer
   * pages. */
  size_t margin = seeded ? MAX((size_t)32, kc) : MAX((size_t)64, 4 * kc);
  const size_t floor_margin = MAX((size_t)16, kc / 4), allowance = (size_t)512 << 20;
  while (margin > floor_margin && (double)n * (double)(kc + margin) * 8.0 > (double)allowance)
    margin = MAX(floor_margin, margin / 2);
  rows->n = n;
  rows->kc = kc;
  rows->cap = kc + margin;
  size_t cells;
  if (!g_size_checked_mul(&cells, n, rows->cap) || cells > G_MAXSIZE / 8)
    return FALSE;
  rows->score = g_try_malloc(MAX(cells, (size_t)1) * sizeof(float));
  rows->index = g_try_malloc(MAX(cells, (size_t)1) * sizeof(int32_t));
  rows->count = g_try_malloc0(MAX(n, (size_t)1) * sizeof(int32_t));
  rows->threshold = g_try_malloc(MAX(n, (size_t)1) * sizeof(float));
  if (rows->score == NULL || rows->index == NULL || rows->count == NULL ||
      rows->threshold == NULL) {
    knnwb_candidate_rows_clear(rows);
    return FALSE;
  }
  for (size_t i = 0; i < n; i++)
    rows->threshold[i] = INFINITY;
  return TRUE;
}

void knnwb_candidate_rows_clear(KnnwbCandidateRows *rows)
{
  g_free(rows->score);
  g_free(rows->index);
  g_free(rows->count);
  g_free(rows->threshold);
  memset(rows, 0, sizeof *rows);
}

/* Moves the values of [lo, hi) below pivot (below or equal with or_equal) to the front, returning
 * where the others start. Branch-free (an unconditional swap and a conditional step): comparisons
 * of nearby scores are unpredictable. */
static size_t knnwb_float_partition(float *values, size_t lo, size_t hi, float pivot,
                                    gboolean or_equal)
{
  size_t store = lo;
  for (size_t i = lo; i < hi; i++) {
    const float v = values[i];
    values[i] = values[store];
    values[store] = v;
    store += or_equal ? v <= pivot : v < pivot;
  }
  return store;
}

float knnwb_float_kth_smallest(float *values, size_t n, size_t k)
{
  size_t lo = 0, hi = n; /* [lo, hi) holds position k - 1 */
  while (hi - lo > 1) {
    float a = values[lo], b = values[lo + (hi - lo) / 2], c = values[hi - 1];
    float pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
    size_t below = knnwb_float_partition(values, lo, hi, pivot, FALSE);
    if (k - 1 < below) {
      hi = below;
      continue;
    }
    size_t equal = knnwb_float_partition(values, below, hi, pivot, TRUE);
    if (k - 1 < equal)
      return pivot; /* the pivot is one of the values: every round shrinks the range */
    lo = equal;
  }
  return values[k - 1];
}

/* Keeps the k (< n) smallest of score/index[0, n) in [0, k), in their order (ties at the k-th:
 * the first ones); scratch holds n floats. Returns the k-th smallest. Selecting on a copy of the
 * scores alone and compacting once moves a third of the bytes a partition of the pairs would. */
static float knnwb_candidate_keep(float *score, int32_t *index, size_t n, size_t k, float *scratch)
{
  memcpy(scratch, score, n * sizeof(float));
  const float kth = knnwb_float_kth_smallest(scratch, n, k);
  size_t below = 0;
  for (size_t c = 0; c < n; c++)
    below += score[c] < kth;
  size_t ties = k - below, kept = 0;
  for (size_t c = 0; c < n; c++) {
    const float s = score[c];
    const gboolean keep = s < kth || (s == kth && ties > 0);
    ties -= s == kth && keep;
    score[kept] = s;
    index[kept] = index[c];
    kept += keep;
  }
  return kth;
}

/* Cuts row i's full buffer to its kc smallest; the threshold becomes the largest kept. */
static size_t knnwb_candidate_rows_cut(KnnwbCandidateRows *rows, size_t i, float *scratch)
{
  rows->threshold[i] = knnwb_candidate_keep(
      rows->score + i * rows->cap, rows->index + i * rows->cap, rows->cap, rows->kc, scratch);
  return rows->kc;
}

static inline void knnwb_candidate_rows_append(KnnwbCandidateRows *rows, float *scratch, size_t i,
                                               float score, size_t j)
{
  size_t c = (size_t)rows->count[i];
  rows->score[i * rows->cap + c] = score;
  rows->index[i * rows->cap + c] = (int32_t)j;
  if (++c == rows->cap)
    c = knnwb_candidate_rows_cut(rows, i, scratch);
  rows->count[i] = (int32_t)c;
}

/* The score of raw value g; base is |r|^2 for L2 (ignored otherwise). */
static inline float knnwb_tile_score(KnnwbTileKind kind, float g, float base)
{
  switch (kind) {
  case KNNWB_TILE_DOT:
    return 1.0f - g;
  case KNNWB_TILE_ABS_DOT:
    return 1.0f - fabsf(g);
  case KNNWB_TILE_L2:
    return base - 2.0f * g;
  default:
    return g;
  }
}

static void knnwb_scan_rows_scalar(KnnwbCandidateRows *rows, float *scratch, const float *tile,
                                   size_t ld, size_t q0, size_t bq, size_t r0, size_t br,
                                   KnnwbTileKind kind, const float *sqnorms)
{
  for (size_t a = 0; a < bq; a++) {
    const float *row = tile + a * ld;
    const size_t i = q0 + a;
    for (size_t b = 0; b < br; b++) {
      float s = knnwb_tile_score(kind, row[b], kind == KNNWB_TILE_L2 ? sqnorms[r0 + b] : 0.0f);
      if (s < rows->threshold[i])
        knnwb_candidate_rows_append(rows, scratch, i, s, r0 + b);
    }
  }
}

static void knnwb_scan_columns_scalar(KnnwbCandidateRows *rows, float *scratch, const float *tile,
                                      size_t ld, size_t q0, size_t bq, size_t r0, size_t br,
                                      KnnwbTileKind kind, const float *sqnorms)
{
  const float *threshold = rows->threshold + r0;
  for (size_t a = 0; a < bq; a++) {
    const float *row = tile + a * ld;
    const float base = kind == KNNWB_TILE_L2 ? sqnorms[q0 + a] : 0.0f;
    for (size_t b = 0; b < br; b++) {
      float s = knnwb_tile_score(kind, row[b], base);
      if (s < threshold[b])
        knnwb_candidate_rows_append(rows, scratch, r0 + b, s, q0 + a);
    }
  }
}

#ifdef KNNWB_SCAN_X86
__attribute__((target("avx512f"))) static inline __m512 knnwb_tile_score16(KnnwbTileKind kind,
                                                                           __m512 g, __m512 base)
{
  switch (kind) {
  case KNNWB_TILE_DOT:
    return _mm512_sub_ps(_mm512_set1_ps(1.0f), g);
  case KNNWB_TILE_ABS_DOT:
    return _mm512_sub_ps(_mm512_set1_ps(1.0f), _mm512_abs_ps(g));
  case KNNWB_TILE_L2:
    return _mm512_sub_ps(base, _mm512_mul_ps(_mm512_set1_ps(2.0f), g));
  default:
    return g;
  }
}

static inline __mmask16 knnwb_scan_lanes(size_t b, size_t br)
{
  return b + 16 <= br ? (__mmask16)0xffff : (__mmask16)((1u << (br - b)) - 1u);
}

__attribute__((target("avx512f"))) static void
knnwb_scan_rows_avx512(KnnwbCandidateRows *rows, float *scratch, const float *tile, size_t ld,
                       size_t q0, size_t bq, size_t r0, size_t br, KnnwbTileKind kind,
                       const float *sqnorms)
{
  const __m512 zero = _mm512_setzero_ps();
  for (size_t a = 0; a < bq; a++) {
    const float *row = tile + a * ld;
    const size_t i = q0 + a;
    __m512 threshold = _mm512_set1_ps(rows->threshold[i]);
    for (size_t b = 0; b < br; b += 16) {
      const __mmask16 lanes = knnwb_scan_lanes(b, br);
      __m512 g = _mm512_maskz_loadu_ps(lanes, row + b);
      __m512 base = kind == KNNWB_TILE_L2 ? _mm512_maskz_loadu_ps(lanes, sqnorms + r0 + b) : zero;
      __mmask16 hits =
          _mm512_mask_cmp_ps_mask(lanes, knnwb_tile_score16(kind, g, base), threshold, _CMP_LT_OQ);
      if (hits == 0)
        continue;
      while (hits != 0) {
        const size_t t = (size_t)__builtin_ctz(hits);
        hits &= (__mmask16)(hits - 1);
        float s =
            knnwb_tile_score(kind, row[b + t], kind == KNNWB_TILE_L2 ? sqnorms[r0 + b + t] : 0.0f);
        if (s < rows->threshold[i])
          knnwb_candidate_rows_append(rows, scratch, i, s, r0 + b + t);
      }
      threshold = _mm512_set1_ps(rows->threshold[i]);
    }
  }
}

__attribute__((target("avx512f"))) static void
knnwb_scan_columns_avx512(KnnwbCandidateRows *rows, float *scratch, const float *tile, size_t ld,
                          size_t q0, size_t bq, size_t r0, size_t br, KnnwbTileKind kind,
                          const float *sqnorms)
{
  const float *threshold = rows->threshold + r0;
  for (size_t a = 0; a < bq; a++) {
    const float *row = tile + a * ld;
    const float base_value = kind == KNNWB_TILE_L2 ? sqnorms[q0 + a] : 0.0f;
    const __m512 base = _mm512_set1_ps(base_value);
    for (size_t b = 0; b < br; b += 16) {
      const __mmask16 lanes = knnwb_scan_lanes(b, br);
      __m512 g = _mm512_maskz_loadu_ps(lanes, row + b);
      __mmask16 hits =
          _mm512_mask_cmp_ps_mask(lanes, knnwb_tile_score16(kind, g, base),
                                  _mm512_maskz_loadu_ps(lanes, threshold + b), _CMP_LT_OQ);
      while (hits != 0) {
        const size_t t = (size_t)__builtin_ctz(hits);
        hits &= (__mmask16)(hits - 1);
        float s = knnwb_tile_score(kind, row[b + t], base_value);
        if (s < threshold[b + t])
          knnwb_candidate_rows_append(rows, scratch, r0 + b + t, s, q0 + a);
      }
    }
  }
}
#endif

#ifdef KNNWB_SCAN_X86
/* The AVX2 scans, for CPUs without AVX-512 (most laptops and many servers and virtual machines:
 * there the scalar loops were over half of a plain search of 50 columns): 8 scores at a time, the
 * last br % 8 of a row by the scalar code. */
__attribute__((target("avx2"))) static inline __m256 knnwb_tile_score8(KnnwbTileKind kind, __m256 g,
                                                                       __m256 base)
{
  switch (kind) {
  case KNNWB_TILE_DOT:
    return _mm256_sub_ps(_mm256_set1_ps(1.0f), g);
  case KNNWB_TILE_ABS_DOT:
    return _mm256_sub_ps(_mm256_set1_ps(1.0f), _mm256_andnot_ps(_mm256_set1_ps(-0.0f), g));
  case KNNWB_TILE_L2:
    return _mm256_sub_ps(base, _mm256_mul_ps(_mm256_set1_ps(2.0f), g));
  default:
    return g;
  }
}

__attribute__((target("avx2"))) static void
knnwb_scan_rows_avx2(KnnwbCandidateRows *rows, float *scratch, const float *tile, size_t ld,
                     size_t q0, size_t bq, size_t r0, size_t br, KnnwbTileKind kind,
                     const float *sqnorms)
{
  const __m256 zero = _mm256_setzero_ps();
  const size_t whole = br / 8 * 8;
  for (size_t a = 0; a < bq; a++) {
    const float *row = tile + a * ld;
    const size_t i = q0 + a;
    __m256 threshold = _mm256_set1_ps(rows->threshold[i]);
    for (size_t b = 0; b < whole; b += 8) {
      const __m256 g = _mm256_loadu_ps(row + b);
      const __m256 base = kind == KNNWB_TILE_L2 ? _mm256_loadu_ps(sqnorms + r0 + b) : zero;
      unsigned hits = (unsigned)_mm256_movemask_ps(
          _mm256_cmp_ps(knnwb_tile_score8(kind, g, base), threshold, _CMP_LT_OQ));
      if (hits == 0)
        continue;
      while (hits != 0) {
        const size_t t = (size_t)__builtin_ctz(hits);
        hits &= hits - 1;
        float s =
            knnwb_tile_score(kind, row[b + t], kind == KNNWB_TILE_L2 ? sqnorms[r0 + b + t] : 0.0f);
        if (s < rows->threshold[i])
          knnwb_candidate_rows_append(rows, scratch, i, s, r0 + b + t);
      }
      threshold = _mm256_set1_ps(rows->threshold[i]);
    }
    for (size_t b = whole; b < br; b++) {
      float s = knnwb_tile_score(kind, row[b], kind == KNNWB_TILE_L2 ? sqnorms[r0 + b] : 0.0f);
      if (s < rows->threshold[i])
        knnwb_candidate_rows_append(rows, scratch, i, s, r0 + b);
    }
  }
}

__attribute__((target("avx2"))) static void
knnwb_scan_columns_avx2(KnnwbCandidateRows *rows, float *scratch, const float *tile, size_t ld,
                        size_t q0, size_t bq, size_t r0, size_t br, KnnwbTileKind kind,
                        const float *sqnorms)
{
  const float *threshold = rows->threshold + r0;
  const size_t whole = br / 8 * 8;
  for (size_t a = 0; a < bq; a++) {
    const float *row = tile + a * ld;
    const float base_value = kind == KNNWB_TILE_L2 ? sqnorms[q0 + a] : 0.0f;
    const __m256 base = _mm256_set1_ps(base_value);
    for (size_t b = 0; b < whole; b += 8) {
      const __m256 g = _mm256_loadu_ps(row + b);
      unsigned hits = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(
          knnwb_tile_score8(kind, g, base), _mm256_loadu_ps(threshold + b), _CMP_LT_OQ));
      while (hits != 0) {
        const size_t t = (size_t)__builtin_ctz(hits);
        hits &= hits - 1;
        float s = knnwb_tile_score(kind, row[b + t], base_value);
        if (s < threshold[b + t])
          knnwb_candidate_rows_append(rows, scratch, r0 + b + t, s, q0 + a);
      }
    }
    for (size_t b = whole; b < br; b++) {
      float s = knnwb_tile_score(kind, row[b], base_value);
      if (s < threshold[b])
        knnwb_candidate_rows_append(rows, scratch, r0 + b, s, q0 + a);
    }
  }
}
#endif

/* The widest scan the CPU has: 2 AVX-512, 1 AVX2, 0 the portable loops. KNNWB_CPU_SCAN=scalar or
 * =avx2 caps it (tests; read per tile, which costs nothing next to a tile's scan). */
static int knnwb_scan_width(void)
{
#ifdef KNNWB_SCAN_X86
  static gsize decided = 0;
  static int width = 0;
  if (g_once_init_enter(&decided)) {
    width = __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
    g_once_init_leave(&decided, 1);
  }
  const char *choice = g_getenv("KNNWB_CPU_SCAN");
  if (choice != NULL && g_ascii_strcasecmp(choice, "scalar") == 0)
    return 0;
  if (choice != NULL && g_ascii_strcasecmp(choice, "avx2") == 0)
    return MIN(width, 1);
  return width;
#else
  return 0;
#endif
}

void knnwb_candidate_rows_scan_rows(KnnwbCandidateRows *rows, float *scratch, const float *tile,
                                    size_t ld, size_t q0, size_t bq, size_t r0, size_t br,
                                    KnnwbTileKind kind, const float *sqnorms)
{
  switch (knnwb_scan_width()) {
#ifdef KNNWB_SCAN_X86
  case 2:
    knnwb_scan_rows_avx512(rows, scratch, tile, ld, q0, bq, r0, br, kind, sqnorms);
    return;
  case 1:
    knnwb_scan_rows_avx2(rows, scratch, tile, ld, q0, bq, r0, br, kind, sqnorms);
    return;
#endif
  default:
    knnwb_scan_rows_scalar(rows, scratch, tile, ld, q0, bq, r0, br, kind, sqnorms);
  }
}

void knnwb_candidate_rows_scan_columns(KnnwbCandidateRows *rows, float *scratch, const float *tile,
                                       size_t ld, size_t q0, size_t bq, size_t r0, size_t br,
                                       KnnwbTileKind kind, const float *sqnorms)
{
  switch (knnwb_scan_width()) {
#ifdef KNNWB_SCAN_X86
  case 2:
    knnwb_scan_columns_avx512(rows, scratch, tile, ld, q0, bq, r0, br, kind, sqnorms);
    return;
  case 1:
    knnwb_scan_columns_avx2(rows, scratch, tile, ld, q0, bq, r0, br, kind, sqnorms);
    return;
#endif
  default:
    knnwb_scan_columns_scalar(rows, scratch, tile, ld, q0, bq, r0, br, kind, sqnorms);
  }
}

void knnwb_candidate_rows_finish(KnnwbCandidateRows *rows, size_t first, size_t last,
                                 size_t out_row0, int64_t *out_index, float *out_score)
{
  const size_t kc = rows->kc;
  float *scratch = g_new(float, rows->cap);
  for (size_t i = first; i < last; i++) {
    float *score = rows->score + i * rows->cap;
    int32_t *index = rows->index + i * rows->cap;
    size_t count = (size_t)rows->count[i];
    if (count > kc) {
      knnwb_candidate_keep(score, index, count, kc, scratch);
      count = kc;
    }
    for (size_t c = 0; c < count; c++) {
      out_index[(i - out_row0) * kc + c] = index[c];
      out_score[(i - out_row0) * kc + c] = score[c];
    }
    for (size_t c = count; c < kc; c++) {
      out_index[(i - out_row0) * kc + c] = -1;
      out_score[(i - out_row0) * kc + c] = INFINITY;
    }
  }
  g_free(scratch);
}
