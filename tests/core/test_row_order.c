/* The centroids a GPU's tile loop groups the rows by (core/engine/row_order.c), host only: on
 * clusters far apart, every cluster has a centroid and every centroid's nearest rows are of one
 * cluster, so grouping by centroid keeps each cluster's rows together. Whether the GPU groups the
 * rows without changing a byte is tests/kernels/test_cuda_knn.c's (row-order). */
#include <math.h>
#include <string.h>
#include <knnwb/knnwb.h>
#include "cpu/cpu.h"
#include "engine/engine_internal.h"

/* n rows of d values, row i in cluster i % clusters (clusters far apart: centres 0, 100, 200, ...
 * in the first column, spread 1), every `invalid_every`-th row marked invalid (0: none). */
typedef struct {
  KnnwbPrepared p;
  float *rows;
  unsigned char *invalid;
} Rows;

static void rows_make(Rows *r, size_t n, size_t d, size_t clusters, size_t invalid_every,
                      guint32 seed)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
  memset(r, 0, sizeof *r);
  r->rows = g_new(float, n *d);
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < d; j++)
      r->rows[i * d + j] =
          (float)((j == 0 ? 100.0 * (double)(i % clusters) : 0.0) + g_rand_double(rand));
  r->p.metric = KNNWB_METRIC_EUCLIDEAN;
  r->p.n = n;
  r->p.d = d;
  r->p.scored = r->rows;
  if (invalid_every > 0) {
    r->invalid = g_new0(unsigned char, n);
    for (size_t i = 0; i < n; i += invalid_every) {
      r->invalid[i] = 1;
      r->p.n_invalid++;
    }
    r->p.invalid = r->invalid;
  }
}

static void rows_clear(Rows *r)
{
  g_free(r->rows);
  g_free(r->invalid);
}

/* Row i's nearest of m centroids (d floats each) by euclidean distance. */
static size_t nearest(const float *row, const float *centroid, size_t m, size_t d)
{
  size_t best = 0;
  double best_sq = INFINITY;
  for (size_t c = 0; c < m; c++) {
    double sq = 0.0;
    for (size_t j = 0; j < d; j++)
      sq += ((double)row[j] - centroid[c * d + j]) * ((double)row[j] - centroid[c * d + j]);
    if (sq < best_sq) {
      best_sq = sq;
      best = c;
    }
  }
  return best;
}

static void test_groups_clusters(void)
{
  const size_t n = 6007, d = 9, clusters = 8;
  Rows r;
  rows_make(&r, n, d, clusters, 13, 1);
  size_t m = 0;
  g_autofree float *centroid = knnwb_row_order_centroids(&r.p, 2, &m);
  g_assert_nonnull(centroid);
  g_assert_cmpuint(m, ==, 64);
  /* each centroid's rows of one cluster; each cluster with rows near a centroid */
  g_autofree int *cluster_of = g_new(int, m);
  g_autofree size_t *rows_of = g_new0(size_t, clusters);
  for (size_t c = 0; c < m; c++)
    cluster_of[c] = -1;
  for (size_t i = 0; i < n; i++) {
    if (r.invalid[i])
      continue;
    const size_t c = nearest(r.rows + i * d, centroid, m, d);
    if (cluster_of[c] < 0)
      cluster_of[c] = (int)(i % clusters);
    g_assert_cmpint(cluster_of[c], ==, (int)(i % clusters));
    rows_of[i % clusters]++;
  }
  for (size_t k = 0; k < clusters; k++)
    g_assert_cmpuint(rows_of[k], >, 0);
  /* every centroid inside a cluster: its first column near 100 times the cluster */
  for (size_t c = 0; c < m; c++)
    if (cluster_of[c] >= 0)
      g_assert_cmpfloat(fabs(centroid[c * d] - 100.0 * cluster_of[c] - 0.5), <, 0.5);
  rows_clear(&r);
}

static void test_nothing_to_group(void)
{
  Rows r;
  rows_make(&r, 500, 4, 3, 0, 2);
  size_t m = 99;
  g_setenv("KNNWB_ROW_ORDER_CELLS", "0", TRUE);
  g_assert_null(knnwb_row_order_centroids(&r.p, 2, &m));
  g_assert_cmpuint(m, ==, 0);
  g_setenv("KNNWB_ROW_ORDER_CELLS", "1", TRUE);
  g_assert_null(knnwb_row_order_centroids(&r.p, 2, &m));
  g_setenv("KNNWB_ROW_ORDER_CELLS", "2", TRUE);
  g_autofree float *two = knnwb_row_order_centroids(&r.p, 2, &m);
  g_assert_nonnull(two);
  g_assert_cmpuint(m, ==, 2);
  g_unsetenv("KNNWB_ROW_ORDER_CELLS");
  rows_clear(&r);
  /* three valid rows of seven: no two cells of two rows */
  rows_make(&r, 7, 4, 3, 2, 3);
  g_assert_cmpuint(r.p.n_invalid, ==, 4);
  g_assert_null(knnwb_row_order_centroids(&r.p, 2, &m));
  rows_clear(&r);
}

/* A backend that is not the CPU's to core (so that the first round groups its rows), which keeps
 * the centroids it was given and selects on the CPU. */
static float *seen_centroids;
static size_t seen_cells;
static int seen_jobs;

static int fake_device_select(const KnnwbSelectJob *job, char *message, size_t message_size)
{
  if (seen_jobs++ == 0 && job->order_centroids != NULL) {
    seen_cells = job->order_cells;
    seen_centroids = g_memdup2(job->order_centroids, seen_cells * job->dim * sizeof(float));
  }
  return knnwb_cpu_select(job, message, message_size);
}

/* The first round of a self search on a device backend fits the centroids on a thread of its own
 * while the margin planner samples the rows (KNNWB_ROW_ORDER_AHEAD=0: in the round, as before):
 * the job gets the same centroids, bit for bit, and the same lists either way, with 1 and 3
 * threads; a run whose round fails before it selects still waits for the fit (the sanitizer
 * builds check that nothing is left running or allocated). */
static void test_centroids_ahead(void)
{
  const size_t n = 3001, d = 7, k = 5;
  Rows r;
  rows_make(&r, n, d, 5, 0, 4);
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(n, d, NULL);
  memcpy(m->values, r.rows, n * d * sizeof(float));
  rows_clear(&r);
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = k;
  options.backend = KNNWB_BACKEND_AUTO;
  g_setenv("KNNWB_ROW_ORDER", "1", TRUE);
  float *first_centroids = NULL;
  size_t first_cells = 0;
  KnnwbNeighbors *first_lists = NULL;
  for (int run = 0; run < 4; run++) {
    const int threads = run % 2 == 0 ? 1 : 3;
    if (run >= 2)
      g_setenv("KNNWB_ROW_ORDER_AHEAD", "0", TRUE);
    KnnwbPrepared p;
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_prepared_init(&p, m, KNNWB_METRIC_EUCLIDEAN, FALSE, "data", threads, NULL,
                                      NULL, &error));
    knnwb_prepared_set_screen(&p, &p, KNNWB_SCREEN_FP32);
    KnnwbNeighbors *lists = knnwb_knn_result_new(0, n, k, &error);
    g_assert_nonnull(lists);
    seen_jobs = 0;
    seen_centroids = NULL;
    g_assert_true(knnwb_knn_rounds(&options, fake_device_select, "fake", &p, &p, TRUE, n - 1,
                                   threads, NULL, 0, n, TRUE, NULL, lists, &error));
    g_assert_no_error(error);
    g_assert_nonnull(seen_centroids);
    g_assert_cmpuint(seen_cells, ==, 64);
    if (run == 0) {
      first_centroids = seen_centroids;
      first_cells = seen_cells;
      first_lists = lists;
    } else {
      g_assert_cmpmem(seen_centroids, seen_cells * d * sizeof(float), first_centroids,
                      first_cells * d * sizeof(float));
      g_assert_cmpmem(lists->indices, n * k * sizeof(int64_t), first_lists->indices,
                      n * k * sizeof(int64_t));
      g_assert_cmpmem(lists->distances, n * k * sizeof(double), first_lists->distances,
                      n * k * sizeof(double));
      g_free(seen_centroids);
      knnwb_neighbors_free(lists);
    }
    knnwb_prepared_clear(&p);
  }
  g_unsetenv("KNNWB_ROW_ORDER_AHEAD");
  /* a round stopped by a raised cancel flag returns after the fit is waited for */
  gint cancel = 1;
  options.cancel = &cancel;
  KnnwbPrepared p;
  g_autoptr(GError) error = NULL;
  g_assert_true(
      knnwb_prepared_init(&p, m, KNNWB_METRIC_EUCLIDEAN, FALSE, "data", 2, NULL, NULL, &error));
  knnwb_prepared_set_screen(&p, &p, KNNWB_SCREEN_FP32);
  KnnwbNeighbors *lists = knnwb_knn_result_new(0, n, k, &error);
  seen_jobs = 0;
  seen_centroids = NULL;
  g_assert_false(knnwb_knn_rounds(&options, fake_device_select, "fake", &p, &p, TRUE, n - 1, 2,
                                  NULL, 0, n, TRUE, NULL, lists, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
  g_free(seen_centroids);
  knnwb_neighbors_free(lists);
  knnwb_prepared_clear(&p);
  g_unsetenv("KNNWB_ROW_ORDER");
  g_free(first_centroids);
  knnwb_neighbors_free(first_lists);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/core/row-order/groups-clusters", test_groups_clusters);
  g_test_add_func("/core/row-order/nothing-to-group", test_nothing_to_group);
  g_test_add_func("/core/row-order/centroids-ahead", test_centroids_ahead);
  return g_test_run();
}
