/* A double-precision brute-force kNN oracle, written independently of the engine. */
#ifndef KNNWB_TEST_ORACLE_H
#define KNNWB_TEST_ORACLE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <glib.h>
#include <knnwb/knn.h>

static void oracle_ranks(const float *x, size_t d, double *out)
{
  for (size_t i = 0; i < d; i++) {
    double less = 0, equal = 0;
    for (size_t j = 0; j < d; j++) {
      if (x[j] < x[i])
        less++;
      else if (x[j] == x[i])
        equal++;
    }
    out[i] = less + (equal + 1) / 2.0;
  }
}

static double oracle_pearson(const double *x, const double *y, size_t d)
{
  double mx = 0, my = 0;
  for (size_t i = 0; i < d; i++) {
    mx += x[i];
    my += y[i];
  }
  mx /= d;
  my /= d;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < d; i++) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxy / sqrt(sxx * syy);
}

static double oracle_distance(KnnwbMetric metric, const float *xf, const float *yf, size_t d)
{
  double x[d + 1], y[d + 1];
  if (metric == KNNWB_METRIC_SPEARMAN) {
    oracle_ranks(xf, d, x);
    oracle_ranks(yf, d, y);
  } else {
    for (size_t i = 0; i < d; i++) {
      x[i] = xf[i];
      y[i] = yf[i];
    }
  }
  double s = 0, nx = 0, ny = 0;
  switch (metric) {
  case KNNWB_METRIC_PEARSON:
  case KNNWB_METRIC_SPEARMAN:
    return 1.0 - oracle_pearson(x, y, d);
  case KNNWB_METRIC_ABS_PEARSON:
    return 1.0 - fabs(oracle_pearson(x, y, d));
  case KNNWB_METRIC_EUCLIDEAN:
    for (size_t i = 0; i < d; i++)
      s += (x[i] - y[i]) * (x[i] - y[i]);
    return sqrt(s);
  case KNNWB_METRIC_MANHATTAN:
    for (size_t i = 0; i < d; i++)
      s += fabs(x[i] - y[i]);
    return s;
  case KNNWB_METRIC_COSINE:
    for (size_t i = 0; i < d; i++) {
      s += x[i] * y[i];
      nx += x[i] * x[i];
      ny += y[i] * y[i];
    }
    return 1.0 - s / sqrt(nx * ny);
  default:
    g_assert_not_reached();
  }
}

typedef struct {
  double distance;
  int64_t index;
} OracleItem;

static int oracle_item_compare(const void *a, const void *b)
{
  const OracleItem *x = a, *y = b;
  if (x->distance != y->distance)
    return x->distance < y->distance ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

/*
 * Checks engine lists against brute force. Distances must agree to tol; an index may differ from
 * the oracle's only where the oracle itself has a near-tie (the two candidates' oracle distances
 * within tol), since the engine and the oracle sum in different orders.
 */
static void oracle_check(KnnwbMetric metric, const float *query, size_t nq, const float *ref,
                         size_t nr, size_t d, gboolean self, const KnnwbNeighbors *nb, double tol)
{
  g_assert_cmpuint(nb->n_queries, ==, nq);
  OracleItem *items = g_new(OracleItem, nr);
  const size_t k = nb->k;
  for (size_t i = 0; i < nq; i++) {
    size_t m = 0;
    for (size_t j = 0; j < nr; j++) {
      if (self && j == i)
        continue;
      items[m].distance = oracle_distance(metric, query + i * d, ref + j * d, d);
      items[m].index = (int64_t)j;
      m++;
    }
    qsort(items, m, sizeof *items, oracle_item_compare);
    g_assert_cmpint(nb->n_found[i], ==, (int)k);
    for (size_t r = 0; r < k; r++) {
      int64_t got = nb->indices[i * k + r];
      double got_distance = nb->distances[i * k + r];
      g_assert_cmpint(got, >=, 0);
      g_assert_cmpint(got, <, (int64_t)nr);
      if (self)
        g_assert_cmpint(got, !=, (int64_t)i);
      double truth = oracle_distance(metric, query + i * d, ref + (size_t)got * d, d);
      g_assert_cmpfloat_with_epsilon(got_distance, truth, tol);
      g_assert_cmpfloat_with_epsilon(got_distance, items[r].distance, tol);
      if (got != items[r].index && fabs(items[r].distance - truth) > tol)
        g_error("row %zu rank %zu: engine %" G_GINT64_FORMAT " (%.17g), oracle %" G_GINT64_FORMAT
                " (%.17g)",
                i, r, got, got_distance, items[r].index, items[r].distance);
      if (r > 0) {
        double prev = nb->distances[i * k + r - 1];
        g_assert_cmpfloat(prev, <=, got_distance);
        if (prev == got_distance)
          g_assert_cmpint(nb->indices[i * k + r - 1], <, got);
      }
    }
  }
  g_free(items);
}

#endif
