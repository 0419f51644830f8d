/* Exact MST of point sets against brute-force Prim and a Kruskal with the same tie order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <igraph.h>
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "knnwb_test_process.h"

typedef struct {
  double w;
  igraph_integer_t a, b;
} Pair;

static int compare_pair(const void *x, const void *y)
{
  const Pair *p = x, *q = y;
  if (p->w != q->w)
    return p->w < q->w ? -1 : 1;
  if (p->a != q->a)
    return p->a < q->a ? -1 : 1;
  return (p->b > q->b) - (p->b < q->b);
}

static int compare_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static igraph_integer_t find(igraph_integer_t *parent, igraph_integer_t x)
{
  while (parent[x] != x)
    x = parent[x] = parent[parent[x]];
  return x;
}

/* Prim in O(n^2) on exact distances: the total weight oracle. */
static double prim_total(const KnnwbMatrix *data, KnnwbMetric metric)
{
  size_t n = data->n_rows, d = data->n_cols;
  if (n <= 1)
    return 0;
  double *key = g_new(double, n);
  gboolean *done = g_new0(gboolean, n);
  for (size_t i = 0; i < n; i++)
    key[i] = INFINITY;
  key[0] = 0;
  double total = 0;
  for (size_t step = 0; step < n; step++) {
    size_t u = SIZE_MAX;
    for (size_t i = 0; i < n; i++)
      if (!done[i] && (u == SIZE_MAX || key[i] < key[u]))
        u = i;
    done[u] = TRUE;
    total += key[u];
    for (size_t v = 0; v < n; v++) {
      if (done[v])
        continue;
      double dist = knnwb_distance_exact(metric, data->values + u * d, data->values + v * d, d);
      if (dist < key[v])
        key[v] = dist;
    }
  }
  g_free(key);
  g_free(done);
  return total;
}

/* Kruskal on the complete graph in (distance, lower, higher) order: the unique expected tree. */
static Pair *kruskal_tree(const KnnwbMatrix *data, KnnwbMetric metric)
{
  size_t n = data->n_rows, d = data->n_cols, m = n * (n - 1) / 2;
  Pair *pairs = g_new(Pair, m + 1);
  size_t e = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t j = i + 1; j < n; j++)
      pairs[e++] =
          (Pair){knnwb_distance_exact(metric, data->values + i * d, data->values + j * d, d),
                 (igraph_integer_t)i, (igraph_integer_t)j};
  qsort(pairs, m, sizeof *pairs, compare_pair);
  igraph_integer_t *parent = g_new(igraph_integer_t, n);
  for (size_t v = 0; v < n; v++)
    parent[v] = (igraph_integer_t)v;
  Pair *tree = g_new(Pair, n);
  size_t t = 0;
  for (size_t i = 0; i < m; i++) {
    igraph_integer_t a = find(parent, pairs[i].a), b = find(parent, pairs[i].b);
    if (a != b) {
      parent[a] = b;
      tree[t++] = pairs[i];
    }
  }
  g_free(parent);
  g_free(pairs);
  return tree;
}

static void check_points(const KnnwbMatrix *data, KnnwbMetric metric, size_t k, int threads)
{
  size_t n = data->n_rows;
  KnnwbMstOptions options;
  knnwb_clustering_mst_options_init(&options);
  options.metric = metric;
  options.k = k;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = threads;
  igraph_t tree;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_clustering_mst_points(data, &options, &tree, &weights, &error));
  g_assert_no_error(error);
  g_assert_cmpint(igraph_vcount(&tree), ==, (igraph_integer_t)n);
  g_assert_cmpint(igraph_ecount(&tree), ==, (igraph_integer_t)(n > 0 ? n - 1 : 0));
  if (n > 1) {
    double total = igraph_vector_sum(&weights);
    double oracle = prim_total(data, metric);
    g_assert_cmpfloat_with_epsilon(total, oracle, 1e-9 * (1 + fabs(oracle)));
    Pair *expected = kruskal_tree(data, metric);
    double *got = g_new(double, n), *want = g_new(double, n);
    for (size_t e = 0; e < n - 1; e++) {
      /* Edges come sorted by (weight, endpoints): the same order as Kruskal's picks. */
      /* igraph stores an undirected edge with from >= to */
      igraph_integer_t lo = MIN(IGRAPH_FROM(&tree, e), IGRAPH_TO(&tree, e));
      igraph_integer_t hi = MAX(IGRAPH_FROM(&tree, e), IGRAPH_TO(&tree, e));
      g_assert_cmpint(lo, ==, expected[e].a);
      g_assert_cmpint(hi, ==, expected[e].b);
      got[e] = VECTOR(weights)[e];
      want[e] = expected[e].w;
    }
    qsort(got, n - 1, sizeof(double), compare_double);
    qsort(want, n - 1, sizeof(double), compare_double);
    for (size_t e = 0; e < n - 1; e++) {
      /* 1e-12, not equality: core's Pearson distance of (x, y) and (y, x) may differ in the
       * last bit (multiplication order of the two inverse norms). */
      g_assert_cmpfloat_with_epsilon(got[e], want[e], 1e-12);
    }
    g_free(got);
    g_free(want);
    g_free(expected);
    igraph_bool_t connected = FALSE;
    igraph_is_connected(&tree, &connected, IGRAPH_WEAK);
    g_assert_true(connected);
  }
  igraph_destroy(&tree);
  igraph_vector_destroy(&weights);
}

static void test_every_metric(void)
{
  GRand *rand = g_rand_new_with_seed(5150);
  const size_t sizes[] = {0, 1, 2, 3, 17, 61};
  const size_t ks[] = {1, 3, 0};
  for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++) {
    for (size_t s = 0; s < G_N_ELEMENTS(sizes); s++) {
      size_t n = sizes[s], d = 7;
      g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
      /* Clustered values make later Borůvka rounds need the brute-force pass. */
      for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
          data->values[i * d + j] =
              (float)(g_rand_double_range(rand, -1, 1) + 5.0 * (double)((i % 3) * (j + 1)));
      for (size_t kk = 0; kk < G_N_ELEMENTS(ks); kk++)
        check_points(data, (KnnwbMetric)metric, ks[kk], 1 + (int)(kk % 3));
    }
  }
  g_rand_free(rand);
}

/* Integer grid points: massive distance ties, the tie order has to be exact. */
static void test_ties(void)
{
  GRand *rand = g_rand_new_with_seed(8);
  for (int trial = 0; trial < 8; trial++) {
    size_t n = 40 + (size_t)trial * 5, d = 2;
    g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
    for (size_t i = 0; i < n * d; i++)
      data->values[i] = (float)g_rand_int_range(rand, 0, 12);
    /* duplicates make zero distances; Manhattan on a grid gives many equal ones */
    check_points(data, KNNWB_METRIC_MANHATTAN, 2, 2);
    check_points(data, KNNWB_METRIC_EUCLIDEAN, 4, 3);
  }
  g_rand_free(rand);
}

/* Rows of a few columns: the k-d tree (core/tree/) answers the kNN lists and the searches for the
 * nearest point outside a component (KNNWB_TREE=1: at any size), in clusters whose later rounds
 * search whole components, and on a grid of tied distances. */
static void test_tree(void)
{
  g_setenv("KNNWB_TREE", "1", TRUE);
  GRand *rand = g_rand_new_with_seed(77);
  for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++) {
    const gboolean lp = metric == KNNWB_METRIC_EUCLIDEAN || metric == KNNWB_METRIC_MANHATTAN;
    const size_t n = 257, d = lp ? 2 : 5;
    g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < d; j++)
        data->values[i * d + j] =
            (float)(g_rand_double_range(rand, -1, 1) + 6.0 * (double)((i % 5) * (j % 2 + 1)));
    check_points(data, (KnnwbMetric)metric, 3, 2);
  }
  g_rand_free(rand);
  test_ties();
  g_unsetenv("KNNWB_TREE");
}

/* Rows of many columns: cells of the rows (core/partition/partition_outside.c) answer the
 * searches for the nearest point outside a component (KNNWB_OUTSIDE_CELLS=1: at any size, every
 * row), in clusters whose later rounds search whole components, and on a grid of tied distances;
 * with =pilot the cells answer a pilot of each round and the tile search the rest. */
static void test_cells(void)
{
  static const char *const modes[] = {"1", "pilot"};
  for (guint mode = 0; mode < G_N_ELEMENTS(modes); mode++) {
    g_setenv("KNNWB_OUTSIDE_CELLS", modes[mode], TRUE);
    GRand *rand = g_rand_new_with_seed(78 + mode);
    for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++) {
      const size_t n = 301, d = 12;
      g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
      for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
          data->values[i * d + j] =
              (float)(g_rand_double_range(rand, -1, 1) + 6.0 * (double)((i % 5) * (j % 3 + 1)));
      check_points(data, (KnnwbMetric)metric, 3, 2);
    }
    g_rand_free(rand);
    test_ties();
  }
  g_unsetenv("KNNWB_OUTSIDE_CELLS");
}

static void test_reused_lists_and_errors(void)
{
  size_t n = 30, d = 3;
  g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
  for (size_t i = 0; i < n * d; i++)
    data->values[i] = (float)((i * 7919) % 101);
  KnnwbKnnOptions knn;
  knnwb_knn_options_init(&knn);
  knn.metric = KNNWB_METRIC_EUCLIDEAN;
  knn.k = 4;
  knn.backend = KNNWB_BACKEND_CPU;
  g_autoptr(KnnwbNeighbors) lists = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_knn_self(data, &knn, &lists, &error));
  KnnwbMstOptions options;
  knnwb_clustering_mst_options_init(&options);
  options.metric = KNNWB_METRIC_EUCLIDEAN;
  options.neighbors = lists;
  igraph_t tree;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  g_assert_true(knnwb_clustering_mst_points(data, &options, &tree, &weights, &error));
  g_assert_cmpfloat_with_epsilon(igraph_vector_sum(&weights),
                                 prim_total(data, KNNWB_METRIC_EUCLIDEAN), 1e-9);
  igraph_destroy(&tree);
  /* Lists of other data are refused. */
  g_autoptr(KnnwbMatrix) other = knnwb_matrix_new(n + 1, d, NULL);
  g_assert_false(knnwb_clustering_mst_points(other, &options, &tree, &weights, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  /* A constant row under Pearson is an error, not a missing vertex. */
  options.neighbors = NULL;
  options.metric = KNNWB_METRIC_PEARSON;
  for (size_t j = 0; j < d; j++)
    data->values[j] = 1;
  g_assert_false(knnwb_clustering_mst_points(data, &options, &tree, &weights, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA);
  igraph_vector_destroy(&weights);
}

/* The exact MST's debug line per round: "... N points searched outside their lists (M lists
 * exhausted) ...". Records the rounds' (N, M). */
static void record_searched(const gchar *domain, GLogLevelFlags level, const gchar *message,
                            gpointer data)
{
  (void)domain, (void)level;
  const char *found = strstr(message, " points searched outside their lists (");
  if (!g_str_has_prefix(message, "exact MST: ") || found == NULL)
    return;
  const char *number = found;
  while (number > message && g_ascii_isdigit(number[-1]))
    number--;
  size_t round[2] = {
      (size_t)g_ascii_strtoull(number, NULL, 10),
      (size_t)g_ascii_strtoull(found + strlen(" points searched outside their lists ("), NULL, 10)};
  g_array_append_vals(data, round, 2);
  if (g_test_verbose())
    g_printerr("%s\n", message);
}

/* Tight clusters far apart with short lists: after the first rounds every list lies inside its
 * component, and each later round must find the components' nearest outside points by search.
 * A point's nearest outside distance from an earlier round bounds its next one from below (the
 * outside only shrinks), which spares most points. Before, every point was searched again in
 * every late round (200,000 rows in 50 clusters: 68 s of single linkage's 81 s). The tree is
 * checked against the oracles as everywhere here; the searches are counted from the debug line. */
static void test_late_rounds_pruned(void)
{
  /* 24 Gaussian clusters in 64 dimensions (as expression rows in modules) */
  const size_t clusters = 24, per = 60, n = clusters * per, d = 64;
  g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, d, NULL);
  GRand *rand = g_rand_new_with_seed(77);
  double centre[24][64];
  for (size_t c = 0; c < clusters; c++)
    for (size_t j = 0; j < d; j++)
      centre[c][j] = 3 * g_rand_double_range(rand, -1.7, 1.7);
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < d; j++)
      data->values[i * d + j] =
          (float)(centre[i % clusters][j] + g_rand_double_range(rand, -1.7, 1.7));
  g_rand_free(rand);
  g_autoptr(GArray) rounds = g_array_new(FALSE, FALSE, sizeof(size_t));
  guint handler = g_log_set_handler(NULL, G_LOG_LEVEL_DEBUG, record_searched, rounds);
  check_points(data, KNNWB_METRIC_EUCLIDEAN, 3, 2);
  g_log_remove_handler(NULL, handler);
  /* After the first round in which every list was exhausted (all points searched once), the
   * later ones search few: every point has its earlier nearest outside distance as a bound. */
  size_t exhausted_rounds = 0;
  for (guint r = 0; r + 1 < rounds->len; r += 2) {
    size_t searched = g_array_index(rounds, size_t, r);
    size_t exhausted = g_array_index(rounds, size_t, r + 1);
    g_assert_cmpuint(searched, <=, exhausted);
    if (exhausted < n)
      continue;
    if (exhausted_rounds++ > 0)
      g_assert_cmpuint(searched, <, n / 4);
  }
  g_assert_cmpuint(exhausted_rounds, >=, 2);
}

/* Under an address-space limit that holds the data and its lists but not the exact MST's O(n)
 * state (about 80 bytes per row), knnwb_clustering_mst_points fails with KNNWB_ERROR_NO_MEMORY
 * naming the rows, where g_new aborted the process. In a subprocess, which keeps the limit. */
static void test_allocation_failure(void)
{
#if defined(__SANITIZE_ADDRESS__)
  /* ASan's allocator reports and aborts on a failed allocation (allocator_may_return_null=0). */
  g_test_skip("allocation failures abort under AddressSanitizer");
  return;
#endif
  if (!g_test_subprocess()) {
    g_test_trap_subprocess(NULL, 60 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_passed();
    return;
  }
  const size_t n = (size_t)4 << 20;
  g_autoptr(KnnwbMatrix) data = knnwb_matrix_new(n, 1, NULL);
  g_assert_nonnull(data);
  /* Points on a line, each listed with its right neighbour (the last with its left one). */
  KnnwbNeighbors lists = {.n_queries = n, .k = 1};
  lists.indices = g_new(int64_t, n);
  lists.distances = g_new(double, n);
  lists.n_found = g_new(int32_t, n);
  for (size_t i = 0; i < n; i++) {
    data->values[i] = (float)i;
    lists.indices[i] = i + 1 < n ? (int64_t)i + 1 : (int64_t)i - 1;
    lists.distances[i] = 1.0;
    lists.n_found[i] = 1;
  }
  KnnwbMstOptions options;
  knnwb_clustering_mst_options_init(&options);
  options.metric = KNNWB_METRIC_EUCLIDEAN;
  options.neighbors = &lists;
  options.n_threads = 1;
  igraph_t tree;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_test_cap_address_space((guint64)64 << 20));
  g_assert_false(knnwb_clustering_mst_points(data, &options, &tree, &weights, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY);
  g_assert_nonnull(strstr(error->message, "for 4194304 rows"));
  igraph_vector_destroy(&weights);
  g_free(lists.indices);
  g_free(lists.distances);
  g_free(lists.n_found);
}

int main(int argc, char **argv)
{
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/clustering/mst/every-metric", test_every_metric);
  g_test_add_func("/clustering/mst/ties", test_ties);
  g_test_add_func("/clustering/mst/tree", test_tree);
  g_test_add_func("/clustering/mst/cells", test_cells);
  g_test_add_func("/clustering/mst/reused-lists-and-errors", test_reused_lists_and_errors);
  g_test_add_func("/clustering/mst/allocation-failure", test_allocation_failure);
  g_test_add_func("/clustering/mst/late-rounds-pruned", test_late_rounds_pruned);
  return g_test_run();
}
