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

typedef struct {
  const KnnwbPrepared *query, *reference;
  gboolean self;
  size_t row0, n_rows, k, n_sample;
  size_t *needed;
} KnnwbMarginSample;

/* The sampled query row s: spread evenly over the round's rows. */
static size_t knnwb_margin_row(const KnnwbMarginSample *m, size_t s)
{
  return m->row0 + (2 * s + 1) * m->n_rows / (2 * m->n_sample);
}

/* Whether reference row j counts for query row i (valid, not the row itself). */
static gboolean knnwb_margin_counts(const KnnwbMarginSample *m, size_t i, size_t j)
{
  return !(m->self && i == j) && !(m->reference->invalid && m->reference->invalid[j]);
}

/* The k-th smallest distance of row i to the valid reference rows (in best, k slots kept sorted),
 * or -1 when fewer than k count. */
static double knnwb_margin_kth(const KnnwbMarginSample *m, size_t i, double *best)
{
  size_t filled = 0;
  for (size_t j = 0; j < m->reference->n; j++) {
    if (!knnwb_margin_counts(m, i, j))
      continue;
    const double dist = knnwb_prepared_distance(m->query, i, m->reference, j);
    if (filled == m->k && !(dist < best[m->k - 1]))
      continue;
    size_t at = filled < m->k ? filled++ : m->k - 1;
    for (; at > 0 && best[at - 1] > dist; at--)
      best[at] = best[at - 1];
    best[at] = dist;
  }
  return filled == m->k ? best[m->k - 1] : -1.0;
}

static void knnwb_margin_rows(size_t first, size_t last, void *user)
{
  const KnnwbMarginSample *m = user;
  g_autofree double *best = g_new(double, m->k);
  for (size_t s = first; s < last; s++) {
    const size_t i = knnwb_margin_row(m, s);
    m->needed[s] = 0;
    if (m->query->invalid && m->query->invalid[i])
      continue;
    const double kth = knnwb_margin_kth(m, i, best);
    if (kth < 0.0)
      continue;
    const double limit = knnwb_refine_window_limit(m->query, i, m->reference, kth);
    size_t inside = 0;
    for (size_t j = 0; j < m->reference->n; j++)
      if (knnwb_margin_counts(m, i, j) &&
          knnwb_prepared_distance(m->query, i, m->reference, j) <= limit)
        inside++;
    m->needed[s] = inside + 1; /* the last candidate must lie past the window */
  }
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
  if (n_sample == 0 || k == 0)
    return kc;
  g_autofree size_t *own = needed == NULL ? g_new(size_t, n_sample) : NULL;
  KnnwbMarginSample m = {query, reference, self, row0, n_rows, k, n_sample, own ? own : needed};
  knnwb_parallel_for(threads, n_sample, 1, knnwb_margin_rows, &m);
  g_autofree size_t *sorted = g_memdup2(m.needed, n_sample * sizeof(size_t));
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
