/* The margin planner (core/engine/margin.c), host only: how many candidates a first round under a
 * half-precision screen collects, from the rows a sample needs inside its certificate's window. */
#include <math.h>
#include <knnwb/knnwb.h>
#include "engine/engine_internal.h"

/* n rows of d values in `clusters` Gaussian clusters whose centres lie far from the origin (the
 * euclidean window, which grows with the rows' norms, then holds many rows), or with spread 0
 * plain standard normal rows. */
static KnnwbMatrix *clustered(size_t n, size_t d, int clusters, double spread, guint32 seed)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  double *centre = g_new(double, (size_t)clusters *d);
  for (size_t i = 0; i < (size_t)clusters * d; i++)
    centre[i] = spread * (g_rand_double(rand) * 2.0 - 1.0);
  for (size_t i = 0; i < n; i++) {
    const size_t c = (size_t)g_rand_int_range(rand, 0, clusters);
    for (size_t j = 0; j < d; j++) {
      /* Box-Muller */
      const double u = g_rand_double_range(rand, 1e-12, 1.0), v = g_rand_double(rand);
      m->values[i * d + j] = (float)(centre[c * d + j] + sqrt(-2.0 * log(u)) * cos(2 * G_PI * v));
    }
  }
  g_free(centre);
  return m;
}

static void prepare(KnnwbPrepared *p, const KnnwbMatrix *m, KnnwbMetric metric, KnnwbScreen screen)
{
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_prepared_init(p, m, metric, FALSE, "data", 2, NULL, NULL, &error));
  g_assert_no_error(error);
  knnwb_prepared_set_screen(p, p, screen);
}

/* Rows inside row i's window, counted here by brute force in double, plus one. The planner
 * estimates distances from the float rows: counts may differ by a row or two at the window's edge.
 */
static size_t needed_of(const KnnwbPrepared *p, size_t i, size_t k)
{
  g_autofree double *dist = g_new(double, p->n - 1);
  size_t m = 0;
  for (size_t j = 0; j < p->n; j++)
    if (j != i)
      dist[m++] = knnwb_prepared_distance(p, i, p, j);
  double kth = INFINITY;
  /* the k-th smallest, by k passes of "smallest above the last" (ties counted) */
  size_t below = 0;
  double last = -INFINITY;
  while (below < k) {
    double next = INFINITY;
    for (size_t j = 0; j < m; j++)
      if (dist[j] > last && dist[j] < next)
        next = dist[j];
    for (size_t j = 0; j < m; j++)
      below += dist[j] == next;
    last = kth = next;
  }
  const double limit = knnwb_refine_window_limit(p, i, p, kth);
  size_t inside = 0;
  for (size_t j = 0; j < m; j++)
    inside += dist[j] <= limit;
  return inside + 1;
}

/* Euclidean rows in tight clusters far from the origin under FP16: the window holds far more rows
 * than the fixed margin, so the planner raises the first round's candidates; the counts are the
 * brute-force ones. */
static void test_euclidean_clusters(void)
{
  const size_t n = 3001, k = 10, kc = 30, sample = 16;
  g_autoptr(KnnwbMatrix) m = clustered(n, 12, 3, 40.0, 11);
  KnnwbPrepared p;
  prepare(&p, m, KNNWB_METRIC_EUCLIDEAN, KNNWB_SCREEN_FP16);
  size_t needed[16];
  const size_t chosen =
      knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, SIZE_MAX, sample, 2, needed);
  size_t over = 0;
  for (size_t s = 0; s < sample; s++) {
    const size_t i = (2 * s + 1) * n / (2 * sample);
    const size_t exact = needed_of(&p, i, k);
    g_assert_cmpuint(needed[s], <=, exact + 2);
    if (needed[s] <= 4 * kc + 1) /* else the count saturated, past any kc the planner takes */
      g_assert_cmpuint(needed[s] + 2, >=, exact);
    g_assert_cmpuint(needed[s], >, k);
    over += needed[s] > kc;
  }
  if (g_test_verbose())
    g_printerr("euclidean clusters: %zu of %zu sample rows need more than %zu; chosen %zu\n", over,
               sample, kc, chosen);
  g_assert_cmpuint(over * 8, >, sample);
  g_assert_cmpuint(chosen, >, kc);
  g_assert_cmpuint(chosen, <=, 4 * kc);
  g_assert_cmpuint(chosen % 8, ==, 0);
  /* the caps: 4 kc, the rows available and the memory bound */
  g_assert_cmpuint(knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, 40, sample, 2, NULL), ==,
                   MIN(chosen, (size_t)40));
  g_assert_cmpuint(knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, 33, SIZE_MAX, sample, 2, NULL),
                   ==, MIN(chosen, 33));
  g_assert_cmpuint(knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, 10, sample, 2, NULL), ==,
                   kc);
  /* the same rows under FP32: a window 2^13 times narrower, the fixed margin kept */
  knnwb_prepared_set_screen(&p, &p, KNNWB_SCREEN_FP32);
  g_assert_cmpuint(knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, SIZE_MAX, sample, 2, NULL),
                   ==, kc);
  knnwb_prepared_clear(&p);
}

/* Pearson rows of plain noise under FP16: few rows inside the window, the fixed margin kept. */
static void test_pearson_plain(void)
{
  const size_t n = 3001, k = 10, kc = 30, sample = 16;
  g_autoptr(KnnwbMatrix) m = clustered(n, 24, 1, 0.0, 12);
  KnnwbPrepared p;
  prepare(&p, m, KNNWB_METRIC_PEARSON, KNNWB_SCREEN_FP16);
  size_t needed[16];
  g_assert_cmpuint(
      knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, SIZE_MAX, sample, 2, needed), ==, kc);
  for (size_t s = 0; s < sample; s++) {
    const size_t exact = needed_of(&p, (2 * s + 1) * n / (2 * sample), k);
    g_assert_cmpuint(needed[s] + 2, >=, exact);
    g_assert_cmpuint(needed[s], <=, exact + 2);
  }
  knnwb_prepared_clear(&p);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/knn/margin/euclidean-clusters", test_euclidean_clusters);
  g_test_add_func("/knn/margin/pearson-plain", test_pearson_plain);
  return g_test_run();
}
