/*
 * The bound space of the partitioned search: rows as double vectors in which the metric's
 * distance is a monotone function of the Euclidean one (the triangle inequality holds there),
 * and blocks of rows with their dot products with the centroids (partition_dots.c).
 *
 * Rounding: bounds need only be bounds, not exact, so every distance here carries a margin far
 * above double rounding (relative 1e-10 of the squared norms plus (4d + 16) units of roundoff),
 * and the engine distance a row's k-th is compared in gets one too (chord_limit).
 */
#include <math.h>
#include <string.h>
#include "partition/partition_internal.h"

#define KNNWB_DOUBLE_ROUNDOFF (1.0 / 9007199254740992.0) /* 2^-53 */

gboolean knnwb_partition_space_row(KnnwbMetric metric, const float *x, size_t d, double *v)
{
  for (size_t j = 0; j < d; j++)
    v[j] = (double)x[j];
  if (metric == KNNWB_METRIC_EUCLIDEAN)
    return TRUE;
  double mean = 0.0;
  if (metric != KNNWB_METRIC_COSINE) {
    for (size_t j = 0; j < d; j++)
      mean += v[j];
    mean /= (double)d;
  }
  double squares = 0.0;
  for (size_t j = 0; j < d; j++) {
    v[j] -= mean;
    squares += v[j] * v[j];
  }
  if (!(squares > 0.0))
    return FALSE;
  const double scale = 1.0 / sqrt(squares);
  for (size_t j = 0; j < d; j++)
    v[j] *= scale;
  return TRUE;
}

double knnwb_partition_chord_limit(KnnwbMetric metric, double distance, size_t d)
{
  /* The engine's double distances err by about d units of roundoff (relative for euclidean,
   * absolute for 1 - r); 1e-9 is far above that for any d below 10^6. */
  const double slack = MAX(1e-9, (4.0 * (double)d + 64.0) * KNNWB_DOUBLE_ROUNDOFF);
  if (isinf(distance))
    return distance;
  if (metric == KNNWB_METRIC_EUCLIDEAN)
    return distance * (1.0 + slack) + 1e-300;
  return sqrt(2.0 * (MAX(distance, 0.0) + slack));
}

gboolean knnwb_partition_block_init(KnnwbPartitionBlock *block, size_t cap, size_t m, size_t d)
{
  memset(block, 0, sizeof *block);
  block->cap = cap;
  block->m = m;
  block->d = d;
  block->v = g_try_new(double, cap *d);
  block->v_sq = g_try_new(double, cap);
  block->dot = g_try_new(double, MAX(cap * m, (size_t)1));
  if (block->v == NULL || block->v_sq == NULL || block->dot == NULL) {
    knnwb_partition_block_clear(block);
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_partition_block_reserve_dots(KnnwbPartitionBlock *block, size_t m)
{
  if (m <= block->m)
    return TRUE;
  double *dot = g_try_realloc_n(block->dot, block->cap, m * sizeof(double));
  if (dot == NULL)
    return FALSE;
  block->dot = dot;
  block->m = m;
  return TRUE;
}

void knnwb_partition_block_clear(KnnwbPartitionBlock *block)
{
  g_clear_pointer(&block->v, g_free);
  g_clear_pointer(&block->v_sq, g_free);
  g_clear_pointer(&block->dot, g_free);
}

gboolean knnwb_partition_block_fill(KnnwbPartitionBlock *block, KnnwbMetric metric,
                                    const KnnwbMatrix *data, size_t first, size_t last,
                                    const int64_t *rows, const double *centroid, size_t m)
{
  const size_t d = block->d;
  block->rows = last - first;
  g_assert(block->rows <= block->cap && m <= block->m);
  for (size_t t = 0; t < block->rows; t++) {
    const size_t row = rows != NULL ? (size_t)rows[first + t] : first + t;
    double *v = block->v + t * d;
    if (!knnwb_partition_space_row(metric, data->values + row * d, d, v))
      return FALSE;
    double squares = 0.0;
    for (size_t j = 0; j < d; j++)
      squares += v[j] * v[j];
    /* a value that is not finite makes it so (the plain search reports such values) */
    if (!isfinite(squares))
      return FALSE;
    block->v_sq[t] = squares;
  }
  knnwb_partition_block_dots(block, centroid, m);
  return TRUE;
}

void knnwb_partition_block_dots(KnnwbPartitionBlock *block, const double *centroid, size_t m)
{
  knnwb_partition_block_dots_rows(block, centroid, m, 0, block->rows);
}

void knnwb_partition_block_dots_rows(KnnwbPartitionBlock *block, const double *centroid, size_t m,
                                     size_t first, size_t last)
{
  g_assert(m <= block->m && last <= block->rows);
  /* dot is rows x block->m whatever m is: readers index it by block->m */
  if (last > first && m > 0 && centroid != NULL)
    knnwb_partition_dots(block->v + first * block->d, last - first, block->d, centroid, m,
                         block->dot + first * block->m, block->m);
}

void knnwb_partition_pair_bounds(KnnwbMetric metric, size_t d, double sq, double dot, double *lower,
                                 double *upper)
{
  *lower = knnwb_partition_pair_lower(metric, d, sq, dot);
  *upper = sqrt(MAX(sq - 2.0 * dot + knnwb_partition_pair_margin(d, sq), 0.0));
}

void knnwb_partition_block_bounds(const KnnwbPartitionBlock *block, KnnwbMetric metric,
                                  const double *centroid_sq, size_t r, size_t j, double *lower,
                                  double *upper)
{
  knnwb_partition_pair_bounds(metric, block->d, block->v_sq[r] + centroid_sq[j],
                              block->dot[r * block->m + j], lower, upper);
}

double knnwb_partition_row_dot(const double *v, const double *centroid, size_t d)
{
  double s = 0.0;
  for (size_t t = 0; t < d; t++)
    s += v[t] * centroid[t];
  return s;
}

double *knnwb_partition_centroid_gaps(const KnnwbPartition *p)
{
  const size_t m = p->m, d = p->d;
  if (p->metric == KNNWB_METRIC_ABS_PEARSON || m < 2 || m > KNNWB_PARTITION_GAPS_MAX_CELLS)
    return NULL;
  double *gap = g_try_new(double, m *m);
  if (gap == NULL)
    return NULL;
  /* a sum of d rounded squares of rounded differences: at most (2 d + 2) units of roundoff low */
  const double low = 1.0 - 1e-12 - (4.0 * (double)d + 16.0) * KNNWB_DOUBLE_ROUNDOFF;
  for (size_t a = 0; a < m; a++) {
    gap[a * m + a] = 0.0;
    for (size_t j = a + 1; j < m; j++) {
      double s = 0.0;
      for (size_t t = 0; t < d; t++) {
        const double e = p->centroid[a * d + t] - p->centroid[j * d + t];
        s += e * e;
      }
      gap[a * m + j] = gap[j * m + a] = sqrt(MAX(s * low, 0.0)) * (1.0 - 1e-15);
    }
  }
  return gap;
}
