/*
 * The margin planner: how many candidates past k a first round under a half-precision screen
 * collects. The fixed margin (screen.c: k + max(20, k/4) for FP16) was measured on correlation
 * rows, where the certificate's window is 2^-9 wide in distance. Euclidean's window scales with
 * (|q| + max |r|)^2, so on rows far from their centroid (clusters) it holds far more rows: on
 * 2,000,000 x 50 rows of 50 Gaussian clusters at k = 30 every row but 273 failed its certificate
 * and was selected again with 200 candidates, in panels of 67,108 rows that each score every
 * reference row (one H200: 4.9 s first round, 10.9 s re-selection). Counting, for a few sample
 * rows, the rows inside their window tells the first round how many candidates the data needs.
 */
#include <math.h>
#include <stdlib.h>
#include <knnwb/parallel.h>
#include "engine/engine_internal.h"

/* Sample rows are scored against blocks of reference rows, every sample row per block, so that
 * the reference rows stream from memory once per pass (two passes: the k-th distance, then the
 * rows inside the window). Distances from the float rows the screen scores: an estimate of the
 * exact ones, close enough to count the window's rows. */
#define KNNWB_MARGIN_BLOCK 4096

typedef struct {
  const KnnwbPrepared *query, *reference;
  gboolean self;
  size_t k, n_sample;
  const size_t *rows;  /* n_sample query rows */
  const double *limit; /* pass 2: each sample row's window; NULL in pass 1 */
  GMutex lock;
  double *best;   /* pass 1: n_sample x k smallest, merged under lock */
  size_t *filled; /* pass 1: of best */
  size_t *inside; /* pass 2: counts, summed under lock */
} KnnwbMarginSample;

static float knnwb_margin_dot(const float *a, const float *b, size_t d)
{
  float lane[8] = {0};
  size_t t = 0;
  for (; t + 8 <= d; t += 8)
    for (int u = 0; u < 8; u++)
      lane[u] += a[t + u] * b[t + u];
  float sum = 0.0f;
  for (; t < d; t++)
    sum += a[t] * b[t];
  for (int u = 0; u < 8; u++)
    sum += lane[u];
  return sum;
}

/* The estimated distance of query row i and reference row j. */
static double knnwb_margin_distance(const KnnwbMarginSample *m, size_t i, size_t j)
{
  const KnnwbPrepared *q = m->query, *r = m->reference;
  const double dot = knnwb_margin_dot(q->scored + i * q->d, r->scored + j * r->d, q->d);
  switch (knnwb_metric_score_kind(q->metric)) {
  case KNNWB_SCORE_L2:
    return sqrt(MAX(0.0, ((double)q->sqnorms[i] + r->sqnorms[j] - 2.0 * dot) * r->score_scale));
  case KNNWB_SCORE_ABS_DOT:
    return 1.0 - fabs(dot);
  default:
    return 1.0 - dot;
  }
}

/* Whether reference row j counts for query row i (valid, not the row itself). */
static gboolean knnwb_margin_counts(const KnnwbMarginSample *m, size_t i, size_t j)
{
  return !(m->self && i == j) && !(m->reference->invalid && m->reference->invalid[j]);
}

/* Keeps the k smallest of best (filled of them, sorted) with dist. */
static void knnwb_margin_keep(double *best, size_t *filled, size_t k, double dist)
{
  if (*filled == k && !(dist < best[k - 1]))
    return;
  size_t at = *filled < k ? (*filled)++ : k - 1;
  for (; at > 0 && best[at - 1] > dist; at--)
    best[at] = best[at - 1];
  best[at] = dist;
}

/* Reference blocks [first, last): pass 1 keeps each sample row's k smallest, pass 2 counts the
 * rows inside each window; the block's results join the totals under the lock. */
static void knnwb_margin_blocks(size_t first, size_t last, void *user)
{
  KnnwbMarginSample *m = user;
  const size_t k = m->k, n_ref = m->reference->n;
  g_autofree double *best = m->limit ? NULL : g_new(double, m->n_sample *k);
  g_autofree size_t *filled = g_new0(size_t, m->n_sample);
  for (size_t j = first * KNNWB_MARGIN_BLOCK; j < MIN(n_ref, last * KNNWB_MARGIN_BLOCK); j++)
    for (size_t s = 0; s < m->n_sample; s++) {
      const size_t i = m->rows[s];
      if (!knnwb_margin_counts(m, i, j))
        continue;
      const double dist = knnwb_margin_distance(m, i, j);
      if (m->limit != NULL)
        filled[s] += dist <= m->limit[s];
      else
        knnwb_margin_keep(best + s * k, &filled[s], k, dist);
    }
  g_mutex_lock(&m->lock);
  for (size_t s = 0; s < m->n_sample; s++) {
    if (m->limit != NULL) {
      m->inside[s] += filled[s];
      continue;
    }
    for (size_t t = 0; t < filled[s]; t++)
      knnwb_margin_keep(m->best + s * k, &m->filled[s], k, best[s * k + t]);
  }
  g_mutex_unlock(&m->lock);
}

static int knnwb_margin_compare(const void *a, const void *b)
{
  const size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

size_t knnwb_margin_choose(const KnnwbPrepared *query, const KnnwbPrepared *reference,
                           gboolean self, size_t row0, size_t n_rows, size_t k, size_t kc,
                           size_t available, size_t max_kc, size_t n_sample, int threads,
                           size_t *needed)
{
  n_sample = MIN(n_sample, n_rows);
  if (n_sample == 0 || k == 0 || knnwb_metric_score_kind(query->metric) == KNNWB_SCORE_L1)
    return kc;
  g_autofree size_t *rows = g_new(size_t, n_sample);
  g_autofree size_t *own = needed == NULL ? g_new0(size_t, n_sample) : NULL;
  g_autofree double *best = g_new(double, n_sample *k);
  g_autofree double *limit = g_new(double, n_sample);
  g_autofree size_t *filled = g_new0(size_t, n_sample);
  KnnwbMarginSample m = {.query = query,
                         .reference = reference,
                         .self = self,
                         .k = k,
                         .n_sample = n_sample,
                         .rows = rows,
                         .best = best,
                         .filled = filled,
                         .inside = own ? own : needed};
  g_mutex_init(&m.lock);
  for (size_t s = 0; s < n_sample; s++) {
    rows[s] = row0 + (2 * s + 1) * n_rows / (2 * n_sample); /* spread evenly */
    m.inside[s] = 0;
  }
  const size_t blocks = (reference->n + KNNWB_MARGIN_BLOCK - 1) / KNNWB_MARGIN_BLOCK;
  knnwb_parallel_for(threads, blocks, 1, knnwb_margin_blocks, &m);
  for (size_t s = 0; s < n_sample; s++) /* no k-th (too few rows, or invalid): counts nothing */
    limit[s] = filled[s] == k && !(query->invalid && query->invalid[rows[s]])
                   ? knnwb_refine_window_limit(query, rows[s], reference, best[s * k + k - 1])
                   : -INFINITY;
  m.limit = limit;
  knnwb_parallel_for(threads, blocks, 1, knnwb_margin_blocks, &m);
  g_mutex_clear(&m.lock);
  for (size_t s = 0; s < n_sample; s++) /* the last candidate must lie past the window */
    m.inside[s] = limit[s] > -INFINITY ? m.inside[s] + 1 : 0;
  g_autofree size_t *sorted = g_memdup2(m.inside, n_sample * sizeof(size_t));
  qsort(sorted, n_sample, sizeof(size_t), knnwb_margin_compare);
  size_t over = 0;
  for (size_t s = 0; s < n_sample; s++)
    over += sorted[s] > kc;
  if (over * 8 <= n_sample)
    return kc; /* the certify loop re-selects those few rows more cheaply */
  const size_t want = (sorted[(7 * n_sample + 7) / 8 - 1] + 7) / 8 * 8;
  const size_t most = MIN(MIN(4 * kc, available), MAX(max_kc, kc));
  return MAX(kc, MIN(want, most));
}
