/*
 * An order of a self search's rows that puts similar rows next to each other
 * (KnnwbSelectJob.order_centroids): the GPU's symmetric tile loop scores each row first against the
 * rows of its own tile, so in this order each row's threshold starts near its k-th distance and the
 * later tiles let far fewer pairs through to the exact passes and merges (a CPU model of the loop,
 * tests/bench/tile_order_sim.py: 38.5 candidates a row instead of 157.8 on bench_knn_gpu's kind
 * of rows, 58.3 instead of 105.0 on real-like metafeatures). Only the speed depends on it: the
 * backend maps every list back, and core certifies the lists as before.
 *
 * Here: the centroids, k-means (Lloyd) of an evenly spaced sample of the rows as the backend
 * scores them (OpenBLAS products with the centroids, in blocks split over the threads). The backend
 * finds every row's nearest centroid where the rows already are (the CUDA backend: on the GPUs,
 * kernels/row_order.cu) and sorts the rows by it.
 */
#include <math.h>
#include <string.h>
#include <cblas.h>
#include <knnwb/parallel.h>
#include "engine/engine_internal.h"

/* OpenBLAS's own thread count (one single-threaded product per thread here, as core/cpu/ does). */
extern int openblas_get_num_threads(void);
extern void openblas_set_num_threads(int);

/* Sample rows the centroids are fitted on, and Lloyd's rounds. */
#define KNNWB_ROW_ORDER_SAMPLE 8192
#define KNNWB_ROW_ORDER_ROUNDS 6
/* Rows a thread assigns per product. */
#define KNNWB_ROW_ORDER_BLOCK 1024

/* The groups to aim at: KNNWB_ROW_ORDER_CELLS (0 = no order), else 64 (the model's best of 11 and
 * 64 on both kinds of rows). */
static size_t knnwb_row_order_cells(void)
{
  const char *v = g_getenv("KNNWB_ROW_ORDER_CELLS");
  if (v == NULL || *v == '\0')
    return 64;
  const gint64 cells = g_ascii_strtoll(v, NULL, 10);
  return cells < 0 ? 0 : (size_t)MIN(cells, 4096);
}

typedef struct {
  const float *rows; /* n x d */
  size_t d, m;
  const float *centroid; /* m x d */
  const float *half_sq;  /* m: |c|^2 / 2 */
  int32_t *cell;         /* n: each row's nearest centroid */
} KnnwbRowOrderAssign;

/* cell[i] = argmax over centroids c of x_i . c - |c|^2 / 2 (the nearest in euclidean distance),
 * for the block of rows [first, first + count) whose products with the centroids are dot. */
static void knnwb_row_order_nearest(const KnnwbRowOrderAssign *a, size_t first, size_t count,
                                    const float *dot)
{
  for (size_t r = 0; r < count; r++) {
    const float *row = dot + r * a->m;
    size_t best = 0;
    float best_score = row[0] - a->half_sq[0];
    for (size_t c = 1; c < a->m; c++) {
      const float score = row[c] - a->half_sq[c];
      if (score > best_score) {
        best_score = score;
        best = c;
      }
    }
    a->cell[first + r] = (int32_t)best;
  }
}

static void knnwb_row_order_assign_rows(size_t first, size_t last, void *user)
{
  const KnnwbRowOrderAssign *a = user;
  float *dot = g_malloc(KNNWB_ROW_ORDER_BLOCK * a->m * sizeof(float));
  for (size_t b = first; b < last; b += KNNWB_ROW_ORDER_BLOCK) {
    const size_t count = MIN((size_t)KNNWB_ROW_ORDER_BLOCK, last - b);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)count, (int)a->m, (int)a->d, 1.0f,
                a->rows + b * a->d, (int)a->d, a->centroid, (int)a->d, 0.0f, dot, (int)a->m);
    knnwb_row_order_nearest(a, b, count, dot);
  }
  g_free(dot);
}

/* Each sample row's nearest centroid, the rows split over threads (OpenBLAS set to one thread by
 * the caller). */
static void knnwb_row_order_assign(KnnwbRowOrderAssign *a, size_t n, int threads)
{
  float *half_sq = g_new(float, a->m);
  for (size_t c = 0; c < a->m; c++) {
    double sq = 0.0;
    for (size_t t = 0; t < a->d; t++)
      sq += (double)a->centroid[c * a->d + t] * a->centroid[c * a->d + t];
    half_sq[c] = (float)(sq / 2.0);
  }
  a->half_sq = half_sq;
  knnwb_parallel_for(threads, n, KNNWB_ROW_ORDER_BLOCK, knnwb_row_order_assign_rows, a);
  a->half_sq = NULL;
  g_free(half_sq);
}

typedef struct {
  const float *sample; /* s x d */
  size_t s, d;
  const int32_t *cell; /* s: each sample row's nearest centroid */
  float *centroid;     /* m x d */
  double *sum;         /* m x d: scratch */
} KnnwbRowOrderUpdate;

/* Centroids [first, last) become the means of their members, summed in row order (so the same bits
 * for any number of threads); one without members is kept. A thread scans every row's cell for
 * its own centroids: 8,192 labels, where one thread alone made all 8,192 x d additions. */
static void knnwb_row_order_update(size_t first, size_t last, void *user)
{
  const KnnwbRowOrderUpdate *u = user;
  const size_t d = u->d;
  for (size_t c = first; c < last; c++) {
    double *sum = u->sum + c * d;
    size_t members = 0;
    memset(sum, 0, d * sizeof(double));
    for (size_t i = 0; i < u->s; i++) {
      if ((size_t)u->cell[i] != c)
        continue;
      members++;
      for (size_t t = 0; t < d; t++)
        sum[t] += u->sample[i * d + t];
    }
    for (size_t t = 0; members > 0 && t < d; t++)
      u->centroid[c * d + t] = (float)(sum[t] / (double)members);
  }
}

/* Lloyd's rounds on the s sample rows (s x d): centroid (m x d) starts at evenly spaced sample
 * rows and becomes the mean of its members (kept where it has none). */
static void knnwb_row_order_fit(const float *sample, size_t s, size_t d, size_t m, float *centroid,
                                int threads)
{
  for (size_t c = 0; c < m; c++)
    memcpy(centroid + c * d, sample + (c * s / m) * d, d * sizeof(float));
  int32_t *cell = g_new(int32_t, s);
  double *sum = g_new(double, m *d);
  KnnwbRowOrderAssign a = {.rows = sample, .d = d, .m = m, .centroid = centroid, .cell = cell};
  KnnwbRowOrderUpdate u = {
      .sample = sample, .s = s, .d = d, .cell = cell, .centroid = centroid, .sum = sum};
  /* OpenBLAS single-threaded inside the threads' products, set once for all rounds; no more threads
   * than the sample has blocks (every parallel loop starts its threads afresh). The fit took
   * 0.035-0.039 s on a 16-core H200 host with these changes and without, 0.016-0.019 s on a 2-core
   * VM: where the larger host spends it is not known. */
  const int saved = openblas_get_num_threads();
  openblas_set_num_threads(1);
  threads = MIN(knnwb_thread_count(threads),
                (int)((s + KNNWB_ROW_ORDER_BLOCK - 1) / KNNWB_ROW_ORDER_BLOCK));
  for (int round = 0; round < KNNWB_ROW_ORDER_ROUNDS; round++) {
    knnwb_row_order_assign(&a, s, threads);
    knnwb_parallel_for(threads, m, 1, knnwb_row_order_update, &u);
  }
  openblas_set_num_threads(saved);
  g_free(sum);
  g_free(cell);
}

float *knnwb_row_order_centroids(const KnnwbPrepared *rows, int threads, size_t *cells)
{
  const size_t n = rows->n, d = rows->d, valid = n - rows->n_invalid;
  const size_t m = MIN(knnwb_row_order_cells(), valid / 2);
  *cells = 0;
  if (m < 2 || d == 0)
    return NULL;
  /* the sample: valid rows at even steps */
  const size_t s = MIN(valid, (size_t)KNNWB_ROW_ORDER_SAMPLE);
  float *sample = g_try_malloc(s * d * sizeof(float));
  float *centroid = g_try_malloc(m * d * sizeof(float));
  if (sample == NULL || centroid == NULL) {
    g_free(sample);
    g_free(centroid);
    return NULL;
  }
  /* the t-th sample is the (t * valid / s)-th valid row: one division per sample, not per row */
  for (size_t i = 0, t = 0, next = 0, wanted = 0; i < n && t < s; i++) {
    if (rows->invalid != NULL && rows->invalid[i])
      continue;
    if (next == wanted) {
      memcpy(sample + (t++) * d, rows->scored + i * d, d * sizeof(float));
      wanted = t * valid / s;
    }
    next++;
  }
  knnwb_row_order_fit(sample, s, d, m, centroid, threads);
  g_free(sample);
  *cells = m;
  return centroid;
}
