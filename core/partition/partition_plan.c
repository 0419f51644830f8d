/*
 * When the partitioned search runs: the environment's override, the number of clusters, and the
 * estimate, from a sample of rows, of the pairs it would score.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/parallel.h>
#include "partition/partition_internal.h"

/* Rows of the sample the estimate is drawn from. */
#define KNNWB_PARTITION_SAMPLE_ROWS ((size_t)256)

KnnwbPartitionMode knnwb_partition_mode(void)
{
  const char *v = g_getenv("KNNWB_PARTITION");
  if (v != NULL && (strcmp(v, "off") == 0 || strcmp(v, "0") == 0))
    return KNNWB_PARTITION_OFF;
  if (v != NULL && (strcmp(v, "on") == 0 || strcmp(v, "1") == 0))
    return KNNWB_PARTITION_ON;
  return KNNWB_PARTITION_AUTO;
}

size_t knnwb_partition_cluster_count(size_t n, size_t k)
{
  size_t target = KNNWB_PARTITION_TARGET_ROWS;
  const char *v = g_getenv("KNNWB_PARTITION_ROWS");
  if (v != NULL && strtoull(v, NULL, 10) > 0)
    target = (size_t)strtoull(v, NULL, 10);
  /* Clusters of a few times k rows at least, or the rows' own lists cover little. */
  target = MAX(target, 4 * (k + 1));
  const size_t m = MIN(n / target, (size_t)4096);
  return m >= 2 ? m : 0;
}

typedef struct {
  const KnnwbPartition *p;
  const KnnwbMatrix *data;
  const KnnwbPartitionBlock *sample;
  const int64_t *rows;
  size_t k;
  double *visited; /* per sample row: the rows of the other clusters it would be searched against */
} KnnwbPartitionEstimate;

static int knnwb_partition_double_compare(const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : (x > y);
}

/* Sample rows [first, last): the k-th chord within their cluster, then the other clusters whose
 * bound does not rule them out. */
static void knnwb_partition_estimate_rows(size_t first, size_t last, void *data)
{
  KnnwbPartitionEstimate *e = data;
  const KnnwbPartition *p = e->p;
  const size_t d = p->d;
  double *w = g_new(double, d);
  for (size_t t = first; t < last; t++) {
    const size_t row = (size_t)e->rows[t], c = (size_t)p->cluster_of[row];
    const size_t size = p->start[c + 1] - p->start[c];
    const double *v = e->sample->v + t * d;
    double *chord = g_new(double, size);
    size_t found = 0;
    for (size_t u = p->start[c]; u < p->start[c + 1]; u++) {
      if ((size_t)p->members[u] == row ||
          !knnwb_partition_space_row(p->metric, e->data->values + p->members[u] * d, d, w))
        continue;
      double plain = 0.0, flipped = 0.0;
      for (size_t j = 0; j < d; j++) {
        plain += (v[j] - w[j]) * (v[j] - w[j]);
        flipped += (v[j] + w[j]) * (v[j] + w[j]);
      }
      chord[found++] = sqrt(p->metric == KNNWB_METRIC_ABS_PEARSON ? MIN(plain, flipped) : plain);
    }
    double limit = HUGE_VAL;
    if (found >= e->k) {
      qsort(chord, found, sizeof(double), knnwb_partition_double_compare);
      limit = chord[e->k - 1] * (1.0 + 1e-6);
    }
    g_free(chord);
    double visited = 0.0;
    for (size_t j = 0; j < p->m; j++) {
      double lower, upper;
      knnwb_partition_block_bounds(e->sample, p->metric, p->centroid_sq, t, j, &lower, &upper);
      if (j != c && lower - p->radius[j] <= limit)
        visited += (double)(p->start[j + 1] - p->start[j]);
    }
    e->visited[t] = visited;
  }
  g_free(w);
}

double knnwb_partition_expected_share(const KnnwbPartition *p, const KnnwbMatrix *data, size_t k)
{
  const size_t s = MIN(p->n, KNNWB_PARTITION_SAMPLE_ROWS);
  int64_t *rows = g_new(int64_t, s);
  for (size_t t = 0; t < s; t++)
    rows[t] = (int64_t)(((2 * t + 1) * (uint64_t)p->n) / (2 * s));
  KnnwbPartitionBlock sample;
  double share = HUGE_VAL;
  if (knnwb_partition_block_init(&sample, s, p->m, p->d) &&
      knnwb_partition_block_fill(&sample, p->metric, data, 0, s, rows, p->centroid, p->m)) {
    KnnwbPartitionEstimate e = {.p = p,
                                .data = data,
                                .sample = &sample,
                                .rows = rows,
                                .k = k,
                                .visited = g_new0(double, s)};
    knnwb_parallel_for(p->threads, s, 1, knnwb_partition_estimate_rows, &e);
    double own = 0.0, other = 0.0;
    for (size_t c = 0; c < p->m; c++)
      own +=
          0.5 * (double)(p->start[c + 1] - p->start[c]) * (double)(p->start[c + 1] - p->start[c]);
    for (size_t t = 0; t < s; t++)
      other += e.visited[t];
    other *= (double)p->n / (double)s;
    share = (own + other) / (0.5 * (double)p->n * (double)p->n);
    g_free(e.visited);
  }
  knnwb_partition_block_clear(&sample);
  g_free(rows);
  return share;
}
