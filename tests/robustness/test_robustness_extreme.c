/* Extreme finite values (ROBUSTNESS.md, "Hostile pipelines, exhausted resources, extreme numbers"):
 * every metric gives the double oracle's lists on data near the float limit, with subnormals, and
 * with magnitudes from 1e-45 to 3e38 mixed in one row, through knnwb_knn_self and knnwb_knn_query
 * (a query far beyond the reference's magnitudes too), on several thread counts and budgets, and
 * never "internal error". Before: manhattan sums overflowed float and ended in "internal error:
 * certification failed". */
#include <float.h>
#include <math.h>
#include <knnwb/knnwb.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function" /* oracle_check: absolute tolerance */
#include "../core/oracle.h"
#pragma GCC diagnostic pop

static const KnnwbMetric all_metrics[] = {KNNWB_METRIC_PEARSON,   KNNWB_METRIC_ABS_PEARSON,
                                          KNNWB_METRIC_SPEARMAN,  KNNWB_METRIC_EUCLIDEAN,
                                          KNNWB_METRIC_MANHATTAN, KNNWB_METRIC_COSINE};

typedef enum { NEAR_LIMIT, SUBNORMAL, MIXED, KIND_COUNT } ExtremeKind;

static float extreme_value(GRand *random, ExtremeKind kind)
{
  double sign = g_rand_boolean(random) ? 1.0 : -1.0;
  switch (kind) {
  case NEAR_LIMIT: /* within a factor of 2 of FLT_MAX */
    return (float)(sign * g_rand_double_range(random, 0.5, 1.0) * FLT_MAX);
  case SUBNORMAL: /* 1 to 2^23 times the smallest subnormal */
    return (float)(sign * ldexp(g_rand_double_range(random, 1.0, 8388608.0), -149));
  default: {
    static const double scales[] = {FLT_MAX, 1e30, 1e10, 1.0, 1e-10, 1e-38, 1e-44};
    double scale = scales[g_rand_int_range(random, 0, G_N_ELEMENTS(scales))];
    return (float)(sign * g_rand_double_range(random, 0.5, 1.0) * scale);
  }
  }
}

static KnnwbMatrix *extreme_matrix(size_t n, size_t d, ExtremeKind kind, guint32 seed)
{
  GRand *random = g_rand_new_with_seed(seed);
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  g_assert_nonnull(m);
  for (size_t c = 0; c < n * d; c++)
    m->values[c] = extreme_value(random, kind);
  g_rand_free(random);
  return m;
}

/* The engine's lists against brute force in double: distances equal to a relative 1e-9 (the
 * oracle sums in another order), indices equal unless the oracle itself has a near-tie there. */
static void check_relative(KnnwbMetric metric, const float *query, size_t nq, const float *ref,
                           size_t nr, size_t d, gboolean self, const KnnwbNeighbors *nb)
{
  OracleItem *items = g_new(OracleItem, nr);
  const size_t k = nb->k;
  for (size_t i = 0; i < nq; i++) {
    size_t m = 0;
    for (size_t j = 0; j < nr; j++)
      if (!self || j != i)
        items[m++] =
            (OracleItem){oracle_distance(metric, query + i * d, ref + j * d, d), (int64_t)j};
    qsort(items, m, sizeof *items, oracle_item_compare);
    g_assert_cmpint(nb->n_found[i], ==, (int)k);
    for (size_t r = 0; r < k; r++) {
      double got = nb->distances[i * k + r], want = items[r].distance;
      double tolerance = 1e-9 * MAX(1.0, fabs(want)) + 1e-300;
      if (!(fabs(got - want) <= tolerance) ||
          (nb->indices[i * k + r] != items[r].index &&
           fabs(oracle_distance(metric, query + i * d, ref + nb->indices[i * k + r] * d, d) -
                want) > tolerance))
        g_error("%s row %zu rank %zu: engine %" G_GINT64_FORMAT
                " at %.17g, oracle %" G_GINT64_FORMAT " at %.17g",
                knnwb_metric_to_string(metric), i, r, nb->indices[i * k + r], got, items[r].index,
                want);
    }
  }
  g_free(items);
}

static void test_self(void)
{
  const size_t n = 97, d = 11, k = 7;
  for (int kind = 0; kind < KIND_COUNT; kind++) {
    g_autoptr(KnnwbMatrix) m = extreme_matrix(n, d, (ExtremeKind)kind, 100 + kind);
    for (guint mi = 0; mi < G_N_ELEMENTS(all_metrics); mi++) {
      g_autoptr(KnnwbNeighbors) first = NULL;
      const int threads[] = {1, 3};
      for (guint t = 0; t < G_N_ELEMENTS(threads); t++) {
        KnnwbKnnOptions options;
        knnwb_knn_options_init(&options);
        options.metric = all_metrics[mi];
        options.k = k;
        options.backend = KNNWB_BACKEND_CPU;
        options.n_threads = threads[t];
        options.memory_bytes = t ? (size_t)64 << 10 : 0;
        g_autoptr(GError) error = NULL;
        g_autoptr(KnnwbNeighbors) nb = NULL;
        if (!knnwb_knn_self(m, &options, &nb, &error))
          g_error("kind %d, %s: %s", kind, knnwb_metric_to_string(all_metrics[mi]), error->message);
        check_relative(all_metrics[mi], m->values, n, m->values, n, d, TRUE, nb);
        if (first == NULL) {
          first = g_steal_pointer(&nb);
        } else {
          g_assert_cmpmem(first->indices, n * k * sizeof(int64_t), nb->indices,
                          n * k * sizeof(int64_t));
          g_assert_cmpmem(first->distances, n * k * sizeof(double), nb->distances,
                          n * k * sizeof(double));
        }
      }
    }
  }
}

/* Query rows near the float limit against a reference of ordinary magnitudes (and the reverse):
 * the query is scored in the reference's frame, where its float scores may overflow; those
 * candidates are computed exactly instead. */
static void test_query(void)
{
  const size_t d = 9, k = 5;
  struct {
    ExtremeKind query, reference;
  } pairs[] = {{NEAR_LIMIT, MIXED}, {MIXED, NEAR_LIMIT}, {SUBNORMAL, NEAR_LIMIT}};
  for (guint p = 0; p < G_N_ELEMENTS(pairs); p++) {
    g_autoptr(KnnwbMatrix) q = extreme_matrix(23, d, pairs[p].query, 200 + p);
    g_autoptr(KnnwbMatrix) r = extreme_matrix(61, d, pairs[p].reference, 300 + p);
    if (pairs[p].reference == MIXED)
      for (size_t c = 0; c < 61 * d; c++)
        r->values[c] = (float)fmod(r->values[c], 1e6); /* ordinary magnitudes only */
    for (guint mi = 0; mi < G_N_ELEMENTS(all_metrics); mi++) {
      KnnwbKnnOptions options;
      knnwb_knn_options_init(&options);
      options.metric = all_metrics[mi];
      options.k = k;
      options.backend = KNNWB_BACKEND_CPU;
      g_autoptr(GError) error = NULL;
      g_autoptr(KnnwbNeighbors) nb = NULL;
      if (!knnwb_knn_query(q, r, &options, &nb, &error))
        g_error("pair %u, %s: %s", p, knnwb_metric_to_string(all_metrics[mi]), error->message);
      check_relative(all_metrics[mi], q->values, 23, r->values, 61, d, FALSE, nb);
    }
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/robustness/extreme/self", test_self);
  g_test_add_func("/robustness/extreme/query", test_query);
  return g_test_run();
}
