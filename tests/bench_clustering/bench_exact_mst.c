/*
 * Exact MST benchmark (not a test): the exact minimum spanning tree of the complete graph of n
 * synthetic expression-like points (planted modules + noise, deterministic), Pearson, against the
 * kNN graph it starts from, in one run. The ratio MST / kNN shows what the Borůvka rounds of
 * nearest-outside searches add on top of the unavoidable kNN pass.
 *
 * Usage: bench_exact_mst [--n N] [--d D] [--k K] [--backend auto|cpu|cuda] [--modules M]
 */
#include <math.h>
#include <stdio.h>
#include <knnwb/knnwb.h>
#include <knnwb/clustering.h>

static KnnwbMatrix *bench_points(size_t n, size_t d, size_t modules)
{
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  g_autoptr(GRand) rng = g_rand_new_with_seed(42);
  float *patterns = g_new(float, modules * d);
  for (size_t i = 0; i < modules * d; i++)
    patterns[i] = (float)g_rand_double_range(rng, -1, 1);
  for (size_t i = 0; i < n; i++) {
    size_t module = (size_t)g_rand_int_range(rng, 0, (gint32)modules);
    double strength = g_rand_double_range(rng, 0.2, 2.0);
    for (size_t j = 0; j < d; j++) {
      double noise = g_rand_double(rng) + g_rand_double(rng) + g_rand_double(rng) - 1.5;
      m->values[i * d + j] = (float)(strength * patterns[module * d + j] + noise);
    }
  }
  g_free(patterns);
  return m;
}

int main(int argc, char **argv)
{
  gint64 n = 20000, d = 64, k = 16, modules = 200;
  g_autofree char *backend_name = g_strdup("auto");
  GOptionEntry entries[] = {{"n", 0, 0, G_OPTION_ARG_INT64, &n, "Points", "N"},
                            {"d", 0, 0, G_OPTION_ARG_INT64, &d, "Dimensions", "D"},
                            {"k", 0, 0, G_OPTION_ARG_INT64, &k, "kNN list length", "K"},
                            {"modules", 0, 0, G_OPTION_ARG_INT64, &modules, "Planted modules", "M"},
                            {"backend", 0, 0, G_OPTION_ARG_STRING, &backend_name, "Backend", "B"},
                            {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new("- exact MST vs its kNN pass");
  g_option_context_add_main_entries(context, entries, NULL);
  g_autoptr(GError) error = NULL;
  KnnwbBackend backend;
  if (!g_option_context_parse(context, &argc, &argv, &error) ||
      !knnwb_backend_from_string(backend_name, &backend, &error)) {
    g_printerr("%s\n", error->message);
    return 2;
  }
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_autoptr(KnnwbMatrix) points = bench_points((size_t)n, (size_t)d, (size_t)modules);

  KnnwbKnnOptions knn;
  knnwb_knn_options_init(&knn);
  knn.k = (size_t)k;
  knn.backend = backend;
  gint64 start = g_get_monotonic_time();
  g_autoptr(KnnwbNeighbors) lists = NULL;
  if (!knnwb_knn_self(points, &knn, &lists, &error)) {
    g_printerr("kNN failed: %s\n", error->message);
    return 1;
  }
  double knn_seconds = (double)(g_get_monotonic_time() - start) / 1e6;

  KnnwbMstOptions options;
  knnwb_clustering_mst_options_init(&options);
  options.k = (size_t)k;
  options.backend = backend;
  igraph_t tree;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  start = g_get_monotonic_time();
  if (!knnwb_clustering_mst_points(points, &options, &tree, &weights, &error)) {
    g_printerr("exact MST failed: %s\n", error->message);
    return 1;
  }
  double mst_seconds = (double)(g_get_monotonic_time() - start) / 1e6;
  printf("| %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT ", pearson, k=%" G_GINT64_FORMAT
         " | %s | kNN graph %.3f s | exact MST (incl. its kNN) %.3f s | MST / kNN %.2fx | %"
         G_GINT64_FORMAT " edges, weight %.9g |\n",
         n, d, k, lists->backend_used, knn_seconds, mst_seconds, mst_seconds / knn_seconds,
         (gint64)igraph_ecount(&tree), igraph_vector_sum(&weights));
  igraph_destroy(&tree);
  igraph_vector_destroy(&weights);
  return 0;
}
