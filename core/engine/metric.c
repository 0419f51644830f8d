/* Metric names and the exact (double precision) distances every backend reports. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/enum_names.h>
#include "base/base.h"
#include "engine/engine_internal.h"

static const KnnwbEnumName knnwb_metric_names[] = {KNNWB_METRIC_NAMES(KNNWB_ENUM_ENTRY)};
const KnnwbEnumTable knnwb_metric_table =
    KNNWB_ENUM_TABLE(knnwb_metric_names, 0, " or ", "unknown metric ", ": use ", "", "(null)");

static const KnnwbEnumName knnwb_backend_names[] = {KNNWB_BACKEND_NAMES(KNNWB_ENUM_ENTRY)};
const KnnwbEnumTable knnwb_backend_table =
    KNNWB_ENUM_TABLE(knnwb_backend_names, 0, " or ", "unknown backend ", ": use ", "", "(null)");

gboolean knnwb_metric_from_string(const char *name, KnnwbMetric *metric, GError **error)
{
  int value;
  if (!knnwb_enum_from_string(&knnwb_metric_table, name, &value, error))
    return FALSE;
  *metric = (KnnwbMetric)value;
  return TRUE;
}

const char *knnwb_metric_to_string(KnnwbMetric metric)
{
  const char *name = knnwb_enum_to_string(&knnwb_metric_table, (int)metric);
  return name != NULL ? name : "unknown";
}

gboolean knnwb_backend_from_string(const char *name, KnnwbBackend *backend, GError **error)
{
  int value;
  if (!knnwb_enum_from_string(&knnwb_backend_table, name, &value, error))
    return FALSE;
  *backend = (KnnwbBackend)value;
  return TRUE;
}

KnnwbScoreKind knnwb_metric_score_kind(KnnwbMetric metric)
{
  switch (metric) {
  case KNNWB_METRIC_ABS_PEARSON:
    return KNNWB_SCORE_ABS_DOT;
  case KNNWB_METRIC_EUCLIDEAN:
    return KNNWB_SCORE_L2;
  case KNNWB_METRIC_MANHATTAN:
    return KNNWB_SCORE_L1;
  default:
    return KNNWB_SCORE_DOT;
  }
}

KnnwbExactKind knnwb_metric_exact_kind(KnnwbMetric metric)
{
  switch (metric) {
  case KNNWB_METRIC_ABS_PEARSON:
    return KNNWB_EXACT_ABS_CORRELATION;
  case KNNWB_METRIC_EUCLIDEAN:
    return KNNWB_EXACT_EUCLIDEAN;
  case KNNWB_METRIC_MANHATTAN:
    return KNNWB_EXACT_MANHATTAN;
  default:
    return KNNWB_EXACT_CORRELATION; /* pearson, spearman (on ranks), cosine (zero means) */
  }
}

static gboolean knnwb_metric_is_centred(KnnwbMetric metric)
{
  return metric == KNNWB_METRIC_PEARSON || metric == KNNWB_METRIC_ABS_PEARSON ||
         metric == KNNWB_METRIC_SPEARMAN;
}

/* (KNNWB_LANES accumulators combined by knnwb_lanes_sum, engine.h: the same order everywhere) */

void knnwb_row_statistics(KnnwbMetric metric, const float *row, size_t d, double *mean,
                          double *sum_squares)
{
  double acc[KNNWB_LANES] = {0};
  size_t j = 0;
  double m = 0.0;
  if (knnwb_metric_is_centred(metric)) {
    for (; j + KNNWB_LANES <= d; j += KNNWB_LANES)
      for (int t = 0; t < KNNWB_LANES; t++)
        acc[t] += row[j + t];
    double sum = knnwb_lanes_sum(acc);
    for (; j < d; j++)
      sum += row[j];
    m = d ? sum / (double)d : 0.0;
  }
  double sq[KNNWB_LANES] = {0};
  for (j = 0; j + KNNWB_LANES <= d; j += KNNWB_LANES)
    for (int t = 0; t < KNNWB_LANES; t++) {
      double c = (double)row[j + t] - m;
      sq[t] += c * c;
    }
  /* The tail summed apart and added once, as knnwb_pair_distance sums its dot product: a row's
   * dot with itself is then its sum of squares bit for bit, and copies are at distance 0. */
  double tail = 0.0;
  for (; j < d; j++)
    tail += ((double)row[j] - m) * ((double)row[j] - m);
  *mean = m;
  *sum_squares = knnwb_lanes_sum(sq) + tail;
}

KNNWB_VECTOR_CLONES
double knnwb_pair_distance(KnnwbMetric metric, const float *x, const float *y, size_t d,
                           double mean_x, double squares_x, double mean_y, double squares_y)
{
  if (metric == KNNWB_METRIC_EUCLIDEAN || metric == KNNWB_METRIC_MANHATTAN)
    return knnwb_distance_lp(metric == KNNWB_METRIC_EUCLIDEAN, x, y, d);
  double acc[KNNWB_LANES] = {0};
  size_t j = 0;
  double tail = 0.0;
  /* Pearson family and cosine: a normalised dot product (means are 0 for cosine). */
  for (; j + KNNWB_LANES <= d; j += KNNWB_LANES)
    for (int t = 0; t < KNNWB_LANES; t++)
      acc[t] += ((double)x[j + t] - mean_x) * ((double)y[j + t] - mean_y);
  for (; j < d; j++)
    tail += ((double)x[j] - mean_x) * ((double)y[j] - mean_y);
  /* sqrt(ssx * ssy) is symmetric in x and y, so d(x, y) == d(y, x) bit for bit; and for x == y
   * the dot product equals ssx bit for bit and sqrt(fl(ssx^2)) == ssx, so identical rows are at
   * distance exactly 0. A zero norm (degenerate row) gives r = 0. */
  double norms = sqrt(squares_x * squares_y);
  double r = norms > 0.0 ? (knnwb_lanes_sum(acc) + tail) / norms : 0.0;
  r = r > 1.0 ? 1.0 : (r < -1.0 ? -1.0 : r);
  return metric == KNNWB_METRIC_ABS_PEARSON ? 1.0 - fabs(r) : 1.0 - r;
}

double knnwb_distance_exact(KnnwbMetric metric, const float *x, const float *y, size_t d)
{
  const float *a = x, *b = y;
  float *ranks = NULL;
  if (metric == KNNWB_METRIC_SPEARMAN) {
    ranks = g_new(float, 2 * d + 1);
    knnwb_row_ranks(x, d, ranks);
    knnwb_row_ranks(y, d, ranks + d);
    a = ranks;
    b = ranks + d;
  }
  double mean_a = 0, squares_a = 0, mean_b = 0, squares_b = 0;
  if (metric != KNNWB_METRIC_EUCLIDEAN && metric != KNNWB_METRIC_MANHATTAN) {
    knnwb_row_statistics(metric, a, d, &mean_a, &squares_a);
    knnwb_row_statistics(metric, b, d, &mean_b, &squares_b);
  }
  double distance = knnwb_pair_distance(metric, a, b, d, mean_a, squares_a, mean_b, squares_b);
  g_free(ranks);
  return distance;
}
