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

/* Sample rows are scored against blocks of reference rows, every sample row per block, so that the
 * reference rows stream from memory once. Each sample row keeps its `keep` smallest distances
 * (a max-heap per thread, merged under a lock): its k-th, and every row inside its window unless
 * more than keep - 1 are (then the count saturates, above any kc the planner may take).
 * Distances from the float rows the screen scores: an estimate of the exact ones, close enough
 * to count the window's rows. Manhattan (screened in FP32 only) is not sampled. */
#define KNNWB_MARGIN_BLOCK 4096

typedef struct {
  const KnnwbPrepared *query, *reference;
  gboolean self;
  KnnwbScoreKind kind;
  size_t keep, n_sample, n_blocks;
  const size_t *rows; /* n_sample query rows */
  GMutex lock;
  double *heap; /* n_sample x keep: each sample row's smallest distances, a max-heap */
  size_t *size; /* of each heap */
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
  switch (m->kind) {
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

/* Offers dist to the max-heap of the keep smallest (size of them so far). O(log keep). */
static void knnwb_margin_offer(double *heap, size_t *size, size_t keep, double dist)
{
  size_t at;
  if (*size < keep) {
    for (at = (*size)++; at > 0 && heap[(at - 1) / 2] < dist; at = (at - 1) / 2)
      heap[at] = heap[(at - 1) / 2];
    heap[at] = dist;
    return;
  }
  if (!(dist < heap[0]))
    return;
  for (at = 0;;) { /* sift the new root down */
    size_t child = 2 * at + 1;
    if (child >= keep)
      break;
    if (child + 1 < keep && heap[child + 1] > heap[child])
      child++;
    if (!(heap[child] > dist))
      break;
    heap[at] = heap[child];
    at = child;
  }
  heap[at] = dist;
}

/* Reference blocks [first, last) against every sample row, then into the shared heaps (once per
 * thread: merged per block of 4,096 rows under the lock, 375 merges of 32 heaps took most of the
 * planner's 0.135 s on 1,533,876 rows and 16 threads). */
static void knnwb_margin_blocks(size_t first, size_t last, void *user)
{
  KnnwbMarginSample *m = user;
  const size_t keep = m->keep, end = MIN(m->reference->n, last * KNNWB_MARGIN_BLOCK);
  g_autofree double *heap = g_new(double, m->n_sample *keep);
  g_autofree size_t *size = g_new0(size_t, m->n_sample);
  for (size_t j = first * KNNWB_MARGIN_BLOCK; j < end; j++)
    for (size_t s = 0; s < m->n_sample; s++)
      if (knnwb_margin_counts(m, m->rows[s], j))
        knnwb_margin_offer(heap + s * keep, &size[s], keep,
                           knnwb_margin_distance(m, m->rows[s], j));
  g_mutex_lock(&m->lock);
  for (size_t s = 0; s < m->n_sample; s++)
    for (size_t t = 0; t < size[s]; t++)
      knnwb_margin_offer(m->heap + s * keep, &m->size[s], keep, heap[s * keep + t]);
  g_mutex_unlock(&m->lock);
}

/* A thread's static share of the reference blocks (they cost alike). */
static void knnwb_margin_share(int thread, int n_threads, void *user)
{
  KnnwbMarginSample *m = user;
  size_t first, last;
  knnwb_team_range(m->n_blocks, thread, n_threads, &first, &last);
  if (first < last)
    knnwb_margin_blocks(first, last, m);
}

static int knnwb_margin_compare_distance(const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int knnwb_margin_compare(const void *a, const void *b)
{
  const size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* Each sample row's count of rows inside its window plus one (0 without a k-th), from its heap. */
static void knnwb_margin_count(KnnwbMarginSample *m, size_t k, size_t *needed)
{
  for (size_t s = 0; s < m->n_sample; s++) {
    double *sorted = m->heap + s * m->keep;
    const size_t i = m->rows[s], size = m->size[s];
    needed[s] = 0;
    if (size < k || (m->query->invalid && m->query->invalid[i]))
      continue;
    qsort(sorted, size, sizeof(double), knnwb_margin_compare_distance);
    const double limit = knnwb_refine_window_limit(m->query, i, m->reference, sorted[k - 1]);
    size_t inside = 0;
    while (inside < size && sorted[inside] <= limit)
      inside++;
    needed[s] = inside + 1; /* the last candidate must lie past the window */
  }
}

size_t knnwb_margin_choose(const KnnwbPrepared *query, const KnnwbPrepared *reference,
                           gboolean self, size_t row0, size_t n_rows, size_t k, size_t kc,
                           size_t available, size_t max_kc, size_t n_sample, int threads,
                           size_t *needed)
{
  n_sample = MIN(n_sample, n_rows);
  if (n_sample == 0 || k == 0 || knnwb_metric_score_kind(query->metric) == KNNWB_SCORE_L1)
    return kc;
  const size_t most = MIN(MIN(4 * kc, available), MAX(max_kc, kc));
  g_autofree size_t *rows = g_new(size_t, n_sample);
  g_autofree size_t *own = needed == NULL ? g_new(size_t, n_sample) : NULL;
  KnnwbMarginSample m = {.query = query,
                         .reference = reference,
                         .self = self,
                         .kind = knnwb_metric_score_kind(query->metric),
                         .keep = MAX(k, MAX(most, kc) + 1),
                         .n_sample = n_sample,
                         .rows = rows};
  g_autofree double *heap = g_new(double, n_sample *m.keep);
  g_autofree size_t *size = g_new0(size_t, n_sample);
  m.heap = heap;
  m.size = size;
  for (size_t s = 0; s < n_sample; s++)
    rows[s] = row0 + (2 * s + 1) * n_rows / (2 * n_sample); /* spread evenly */
  g_mutex_init(&m.lock);
  m.n_blocks = (reference->n + KNNWB_MARGIN_BLOCK - 1) / KNNWB_MARGIN_BLOCK;
  knnwb_team_run((int)MIN((size_t)knnwb_thread_count(threads), m.n_blocks), knnwb_margin_share, &m);
  g_mutex_clear(&m.lock);
  size_t *count = own ? own : needed;
  knnwb_margin_count(&m, k, count);
  g_autofree size_t *sorted = g_memdup2(count, n_sample * sizeof(size_t));
  qsort(sorted, n_sample, sizeof(size_t), knnwb_margin_compare);
  size_t over = 0;
  for (size_t s = 0; s < n_sample; s++)
    over += sorted[s] > kc;
  if (over * 8 <= n_sample)
    return kc; /* the certify loop re-selects those few rows more cheaply */
  const size_t want = (sorted[(7 * n_sample + 7) / 8 - 1] + 7) / 8 * 8;
  return MAX(kc, MIN(want, most));
}
