/* Borůvka spanning forest and components against a Kruskal oracle written here. */
#include <math.h>
#include <stdlib.h>
#include <igraph.h>
#include <knnwb/clustering.h>
#include <knnwb/error.h>
#include "knnwb_kernels.h"

static igraph_t *make_graph(igraph_integer_t n, const igraph_integer_t *pairs, igraph_integer_t m,
                            gboolean directed)
{
  igraph_t *graph = g_new(igraph_t, 1);
  igraph_vector_int_t edges;
  igraph_vector_int_init(&edges, 2 * m);
  for (igraph_integer_t i = 0; i < 2 * m; i++)
    VECTOR(edges)[i] = pairs[i];
  g_assert_cmpint(igraph_create(graph, &edges, n, directed), ==, IGRAPH_SUCCESS);
  igraph_vector_int_destroy(&edges);
  return graph;
}

static void free_graph(igraph_t *graph)
{
  igraph_destroy(graph);
  g_free(graph);
}

static int compare_by_weight_then_id(const void *a, const void *b, void *data)
{
  const double *w = data;
  igraph_integer_t x = *(const igraph_integer_t *)a, y = *(const igraph_integer_t *)b;
  if (w[x] != w[y])
    return w[x] < w[y] ? -1 : 1;
  return (x > y) - (x < y);
}

static igraph_integer_t find(igraph_integer_t *parent, igraph_integer_t x)
{
  while (parent[x] != x)
    x = parent[x] = parent[parent[x]];
  return x;
}

/* Kruskal with the (weight, id) order: the unique forest under that order. */
static void kruskal(const igraph_t *graph, const igraph_vector_t *weights, igraph_vector_int_t *out)
{
  igraph_integer_t n = igraph_vcount(graph), m = igraph_ecount(graph);
  igraph_integer_t *order = g_new(igraph_integer_t, m + 1);
  igraph_integer_t *parent = g_new(igraph_integer_t, n + 1);
  for (igraph_integer_t e = 0; e < m; e++)
    order[e] = e;
  g_qsort_with_data(order, (gint)m, sizeof *order, compare_by_weight_then_id, VECTOR(*weights));
  for (igraph_integer_t v = 0; v < n; v++)
    parent[v] = v;
  igraph_vector_int_clear(out);
  for (igraph_integer_t i = 0; i < m; i++) {
    igraph_integer_t e = order[i];
    igraph_integer_t a = find(parent, IGRAPH_FROM(graph, e)), b = find(parent, IGRAPH_TO(graph, e));
    if (a == b)
      continue;
    parent[a] = b;
    igraph_vector_int_push_back(out, e);
  }
  igraph_vector_int_sort(out);
  g_free(order);
  g_free(parent);
}

static int compare_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The oracle checks of BRIEF §3: weight, sorted weights, n - c edges, no cycle; plus equality. */
static void check_forest(const igraph_t *graph, const igraph_vector_t *weights,
                         const igraph_vector_int_t *forest, const igraph_vector_int_t *membership,
                         igraph_integer_t n_components)
{
  igraph_integer_t n = igraph_vcount(graph);
  igraph_vector_int_t expected;
  igraph_vector_int_init(&expected, 0);
  kruskal(graph, weights, &expected);
  igraph_integer_t f = igraph_vector_int_size(forest);
  g_assert_cmpint(f, ==, igraph_vector_int_size(&expected));
  double *got_w = g_new(double, f + 1), *want_w = g_new(double, f + 1);
  double total_got = 0, total_want = 0;
  for (igraph_integer_t i = 0; i < f; i++) {
    got_w[i] = VECTOR(*weights)[VECTOR(*forest)[i]];
    want_w[i] = VECTOR(*weights)[VECTOR(expected)[i]];
    total_got += got_w[i];
    total_want += want_w[i];
  }
  g_assert_cmpfloat_with_epsilon(total_got, total_want, 1e-9 * (1 + fabs(total_want)));
  qsort(got_w, f, sizeof(double), compare_double);
  qsort(want_w, f, sizeof(double), compare_double);
  for (igraph_integer_t i = 0; i < f; i++)
    g_assert_cmpfloat(got_w[i], ==, want_w[i]);
  /* Unique under (weight, id): the very same edges. */
  for (igraph_integer_t i = 0; i < f; i++)
    g_assert_cmpint(VECTOR(*forest)[i], ==, VECTOR(expected)[i]);
  /* No cycle and n - c edges, c from igraph. */
  igraph_integer_t *parent = g_new(igraph_integer_t, n + 1);
  for (igraph_integer_t v = 0; v < n; v++)
    parent[v] = v;
  for (igraph_integer_t i = 0; i < f; i++) {
    igraph_integer_t e = VECTOR(*forest)[i];
    igraph_integer_t a = find(parent, IGRAPH_FROM(graph, e)), b = find(parent, IGRAPH_TO(graph, e));
    g_assert_cmpint(a, !=, b);
    parent[a] = b;
  }
  igraph_integer_t c = 0;
  g_assert_cmpint(igraph_connected_components(graph, NULL, NULL, &c, IGRAPH_WEAK), ==, 0);
  g_assert_cmpint(f, ==, n - c);
  g_assert_cmpint(n_components, ==, c);
  /* Membership: same partition as the forest's components, numbered by lowest vertex. */
  igraph_integer_t next = 0;
  igraph_integer_t *seen = g_new(igraph_integer_t, n + 1);
  for (igraph_integer_t v = 0; v < n; v++)
    seen[v] = -1;
  for (igraph_integer_t v = 0; v < n; v++) {
    igraph_integer_t root = find(parent, v);
    if (seen[root] < 0)
      seen[root] = next++;
    g_assert_cmpint(VECTOR(*membership)[v], ==, seen[root]);
  }
  g_free(seen);
  g_free(parent);
  g_free(got_w);
  g_free(want_w);
  igraph_vector_int_destroy(&expected);
}

static void run_forest(const igraph_t *graph, const igraph_vector_t *weights, KnnwbBackend backend,
                       int n_threads, igraph_vector_int_t *forest, igraph_vector_int_t *membership,
                       igraph_integer_t *count)
{
  KnnwbForestOptions options;
  knnwb_clustering_forest_options_init(&options);
  options.backend = backend;
  options.n_threads = n_threads;
  g_autoptr(GError) error = NULL;
  gboolean ok =
      knnwb_clustering_spanning_forest(graph, weights, &options, forest, membership, count, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
}

static double forest_weight(const igraph_vector_t *weights, const igraph_vector_int_t *forest)
{
  double total = 0;
  for (igraph_integer_t i = 0; i < igraph_vector_int_size(forest); i++)
    total += VECTOR(*weights)[VECTOR(*forest)[i]];
  return total;
}

static void test_fixed_cases(void)
{
  igraph_vector_int_t forest, membership;
  igraph_vector_int_init(&forest, 0);
  igraph_vector_int_init(&membership, 0);
  igraph_integer_t count = 0;

  const igraph_integer_t square[] = {0, 1, 0, 3, 1, 3, 2, 3, 1, 2};
  double square_w[] = {8, 3, 5, 6, 2};
  igraph_t *graph = make_graph(4, square, 5, FALSE);
  igraph_vector_t weights;
  igraph_vector_view(&weights, square_w, 5);
  for (int threads = 1; threads <= 3; threads++) {
    run_forest(graph, &weights, KNNWB_BACKEND_CPU, threads, &forest, &membership, &count);
    g_assert_cmpint(igraph_vector_int_size(&forest), ==, 3);
    g_assert_cmpfloat(forest_weight(&weights, &forest), ==, 10);
    g_assert_cmpint(count, ==, 1);
    check_forest(graph, &weights, &forest, &membership, count);
  }
  free_graph(graph);

  const igraph_integer_t two[] = {0, 1, 1, 2, 0, 2, 3, 4};
  double two_w[] = {1, 2, 3, 4};
  graph = make_graph(5, two, 4, FALSE);
  igraph_vector_view(&weights, two_w, 4);
  run_forest(graph, &weights, KNNWB_BACKEND_CPU, 2, &forest, &membership, &count);
  g_assert_cmpint(igraph_vector_int_size(&forest), ==, 3);
  g_assert_cmpfloat(forest_weight(&weights, &forest), ==, 7);
  g_assert_cmpint(count, ==, 2);
  g_assert_cmpint(VECTOR(membership)[0], ==, 0);
  g_assert_cmpint(VECTOR(membership)[2], ==, 0);
  g_assert_cmpint(VECTOR(membership)[3], ==, 1);
  g_assert_cmpint(VECTOR(membership)[4], ==, 1);
  check_forest(graph, &weights, &forest, &membership, count);

  /* The forest as a graph. */
  igraph_t tree;
  igraph_vector_t tree_weights;
  igraph_vector_init(&tree_weights, 0);
  g_autoptr(GError) error = NULL;
  g_assert_true(
      knnwb_clustering_forest_graph(graph, &weights, &forest, &tree, &tree_weights, &error));
  g_assert_cmpint(igraph_vcount(&tree), ==, 5);
  g_assert_cmpint(igraph_ecount(&tree), ==, 3);
  g_assert_cmpfloat(igraph_vector_sum(&tree_weights), ==, 7);
  igraph_destroy(&tree);
  igraph_vector_destroy(&tree_weights);
  free_graph(graph);

  /* Empty graph, one vertex, a self-loop only. */
  const igraph_integer_t loop[] = {0, 0};
  double loop_w[] = {1};
  graph = make_graph(1, loop, 1, TRUE);
  igraph_vector_view(&weights, loop_w, 1);
  run_forest(graph, &weights, KNNWB_BACKEND_CPU, 2, &forest, &membership, &count);
  g_assert_cmpint(igraph_vector_int_size(&forest), ==, 0);
  g_assert_cmpint(count, ==, 1);
  free_graph(graph);
  graph = make_graph(0, NULL, 0, FALSE);
  igraph_vector_view(&weights, loop_w, 0);
  run_forest(graph, &weights, KNNWB_BACKEND_CPU, 2, &forest, &membership, &count);
  g_assert_cmpint(igraph_vector_int_size(&forest), ==, 0);
  g_assert_cmpint(count, ==, 0);
  free_graph(graph);

  igraph_vector_int_destroy(&forest);
  igraph_vector_int_destroy(&membership);
}

static void test_bad_input(void)
{
  const igraph_integer_t pairs[] = {0, 1, 1, 2};
  double w[] = {1, NAN};
  igraph_t *graph = make_graph(3, pairs, 2, FALSE);
  igraph_vector_t weights;
  igraph_vector_int_t forest;
  igraph_vector_int_init(&forest, 0);
  KnnwbForestOptions options;
  knnwb_clustering_forest_options_init(&options);
  options.backend = KNNWB_BACKEND_CPU;
  g_autoptr(GError) error = NULL;
  igraph_vector_view(&weights, w, 2);
  g_assert_false(
      knnwb_clustering_spanning_forest(graph, &weights, &options, &forest, NULL, NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  igraph_vector_view(&weights, w, 1);
  g_assert_false(
      knnwb_clustering_spanning_forest(graph, &weights, &options, &forest, NULL, NULL, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  if (knnwb_cuda_device_count() == 0) {
    w[1] = 2;
    igraph_vector_view(&weights, w, 2);
    options.backend = KNNWB_BACKEND_CUDA;
    g_assert_false(
        knnwb_clustering_spanning_forest(graph, &weights, &options, &forest, NULL, NULL, &error));
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_DEVICE);
  }
  igraph_vector_int_destroy(&forest);
  free_graph(graph);
}

/* A random multigraph: ties (few distinct weights), self-loops, isolated vertices, components. */
static igraph_t *random_graph(GRand *rand, igraph_vector_t *weights, gboolean directed)
{
  igraph_integer_t n = g_rand_int_range(rand, 1, 300);
  igraph_integer_t blocks = g_rand_int_range(rand, 1, 6);
  igraph_integer_t m = g_rand_int_range(rand, 0, 4 * n + 1);
  int distinct = g_rand_int_range(rand, 1, 12);
  igraph_integer_t *pairs = g_new(igraph_integer_t, 2 * m + 2);
  igraph_vector_resize(weights, m);
  for (igraph_integer_t e = 0; e < m; e++) {
    /* Endpoints in the same block: several components; the top 10% of vertices stay isolated. */
    igraph_integer_t usable = MAX(1, n - n / 10);
    igraph_integer_t block = g_rand_int_range(rand, 0, (gint32)blocks);
    igraph_integer_t lo = usable * block / blocks, hi = usable * (block + 1) / blocks;
    if (hi <= lo)
      hi = lo + 1;
    pairs[2 * e] = g_rand_int_range(rand, (gint32)lo, (gint32)hi);
    pairs[2 * e + 1] = g_rand_int_range(rand, (gint32)lo, (gint32)hi);
    VECTOR(*weights)[e] = g_rand_int_range(rand, 0, distinct) * 0.5;
  }
  igraph_t *graph = make_graph(n, pairs, m, directed);
  g_free(pairs);
  return graph;
}

static void test_random_against_kruskal(void)
{
  GRand *rand = g_rand_new_with_seed(20240605);
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  igraph_vector_int_t forest, membership;
  igraph_vector_int_init(&forest, 0);
  igraph_vector_int_init(&membership, 0);
  for (int trial = 0; trial < 300; trial++) {
    igraph_t *graph = random_graph(rand, &weights, trial % 2 == 0);
    igraph_integer_t count = -1;
    int threads = 1 + trial % 4;
    run_forest(graph, &weights, KNNWB_BACKEND_CPU, threads, &forest, &membership, &count);
    check_forest(graph, &weights, &forest, &membership, count);
    free_graph(graph);
  }
  igraph_vector_int_destroy(&forest);
  igraph_vector_int_destroy(&membership);
  igraph_vector_destroy(&weights);
  g_rand_free(rand);
}

static void test_gpu_equals_cpu(void)
{
  if (knnwb_cuda_device_count() == 0) {
    g_test_skip("no CUDA device (or knnwb built without CUDA)");
    return;
  }
  GRand *rand = g_rand_new_with_seed(77);
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  igraph_vector_int_t cpu, gpu, cpu_m, gpu_m;
  igraph_vector_int_init(&cpu, 0);
  igraph_vector_int_init(&gpu, 0);
  igraph_vector_int_init(&cpu_m, 0);
  igraph_vector_int_init(&gpu_m, 0);
  for (int trial = 0; trial < 100; trial++) {
    igraph_t *graph = random_graph(rand, &weights, trial % 2 == 0);
    igraph_integer_t c1 = 0, c2 = 0;
    run_forest(graph, &weights, KNNWB_BACKEND_CPU, 2, &cpu, &cpu_m, &c1);
    run_forest(graph, &weights, KNNWB_BACKEND_CUDA, 0, &gpu, &gpu_m, &c2);
    g_assert_true(igraph_vector_int_all_e(&cpu, &gpu));
    g_assert_true(igraph_vector_int_all_e(&cpu_m, &gpu_m));
    g_assert_cmpint(c1, ==, c2);
    free_graph(graph);
  }
  /* A larger graph with many rounds. */
  {
    igraph_integer_t n = 200000, k = 8, m = n * k;
    igraph_integer_t *pairs = g_new(igraph_integer_t, 2 * m);
    igraph_vector_resize(&weights, m);
    for (igraph_integer_t e = 0; e < m; e++) {
      pairs[2 * e] = e / k;
      pairs[2 * e + 1] = g_rand_int_range(rand, 0, (gint32)n);
      VECTOR(weights)[e] = g_rand_int_range(rand, 0, 1000);
    }
    igraph_t *graph = make_graph(n, pairs, m, TRUE);
    g_free(pairs);
    igraph_integer_t c1 = 0, c2 = 0;
    run_forest(graph, &weights, KNNWB_BACKEND_CPU, 0, &cpu, &cpu_m, &c1);
    run_forest(graph, &weights, KNNWB_BACKEND_CUDA, 0, &gpu, &gpu_m, &c2);
    g_assert_true(igraph_vector_int_all_e(&cpu, &gpu));
    g_assert_cmpint(c1, ==, c2);
    check_forest(graph, &weights, &gpu, &gpu_m, c2);
    free_graph(graph);
  }
  igraph_vector_int_destroy(&cpu);
  igraph_vector_int_destroy(&gpu);
  igraph_vector_int_destroy(&cpu_m);
  igraph_vector_int_destroy(&gpu_m);
  igraph_vector_destroy(&weights);
  g_rand_free(rand);
}

static void test_components(void)
{
  GRand *rand = g_rand_new_with_seed(99);
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  igraph_vector_int_t membership, sizes, expected;
  igraph_vector_int_init(&membership, 0);
  igraph_vector_int_init(&sizes, 0);
  igraph_vector_int_init(&expected, 0);
  for (int trial = 0; trial < 100; trial++) {
    igraph_t *graph = random_graph(rand, &weights, trial % 2 == 0);
    igraph_integer_t count = 0, expected_count = 0;
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_clustering_components(graph, &membership, &sizes, &count, &error));
    g_assert_cmpint(
        igraph_connected_components(graph, &expected, NULL, &expected_count, IGRAPH_WEAK), ==, 0);
    g_assert_cmpint(count, ==, expected_count);
    /* igraph also numbers by first vertex met in vertex order. */
    igraph_integer_t n = igraph_vcount(graph), total = 0;
    for (igraph_integer_t v = 0; v < n; v++)
      g_assert_cmpint(VECTOR(membership)[v], ==, VECTOR(expected)[v]);
    for (igraph_integer_t c = 0; c < count; c++)
      total += VECTOR(sizes)[c];
    g_assert_cmpint(total, ==, n);
    free_graph(graph);
  }
  igraph_vector_int_destroy(&membership);
  igraph_vector_int_destroy(&sizes);
  igraph_vector_int_destroy(&expected);
  igraph_vector_destroy(&weights);
  g_rand_free(rand);
}

int main(int argc, char **argv)
{
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/clustering/forest/fixed", test_fixed_cases);
  g_test_add_func("/clustering/forest/bad-input", test_bad_input);
  g_test_add_func("/clustering/forest/random-kruskal", test_random_against_kruskal);
  g_test_add_func("/clustering/forest/gpu-equals-cpu", test_gpu_equals_cpu);
  g_test_add_func("/clustering/components/random", test_components);
  return g_test_run();
}
