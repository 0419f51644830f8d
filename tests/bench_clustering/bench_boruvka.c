/*
 * Benchmark: Borůvka spanning forest (CPU, and GPU when one is usable) against igraph's
 * igraph_minimum_spanning_tree (Prim) on the same kNN-like graph, in one run.
 *
 *   bench_clustering_boruvka [n=1000000] [k=20] [points|random] [threads=0]
 *
 * points: n uniform random points in the unit square, each joined to its k nearest among the
 *         points of its 3 x 3 grid cells (cells of ~4 points, so ~36 candidates: a near-exact kNN
 *         graph), weight = Euclidean distance; directed, n * k edges, vertex i's edges in rank
 * order. random: each vertex gets k out-edges to uniform random vertices with uniform random
 * weights. Prints timings, the ratio igraph / Borůvka, and checks the forests have equal total
 * weight.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <igraph.h>
#include <knnwb/clustering.h>
#include "knnwb_kernels.h"

typedef struct {
  double distance;
  igraph_integer_t index;
} Candidate;

static int compare_candidate(const void *a, const void *b)
{
  const Candidate *x = a, *y = b;
  if (x->distance != y->distance)
    return x->distance < y->distance ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

static void build_points_graph(GRand *rand, igraph_integer_t n, igraph_integer_t k,
                               igraph_vector_int_t *edges, igraph_vector_t *weights)
{
  double *x = g_new(double, n), *y = g_new(double, n);
  for (igraph_integer_t i = 0; i < n; i++) {
    x[i] = g_rand_double(rand);
    y[i] = g_rand_double(rand);
  }
  igraph_integer_t side = MAX(1, (igraph_integer_t)sqrt((double)n / 4.0));
  igraph_integer_t cells = side * side;
  igraph_integer_t *start = g_new0(igraph_integer_t, cells + 1);
  igraph_integer_t *members = g_new(igraph_integer_t, n);
  igraph_integer_t *cell_of = g_new(igraph_integer_t, n);
  for (igraph_integer_t i = 0; i < n; i++) {
    igraph_integer_t cx = MIN(side - 1, (igraph_integer_t)(x[i] * side));
    igraph_integer_t cy = MIN(side - 1, (igraph_integer_t)(y[i] * side));
    cell_of[i] = cy * side + cx;
    start[cell_of[i] + 1]++;
  }
  for (igraph_integer_t c = 0; c < cells; c++)
    start[c + 1] += start[c];
  igraph_integer_t *fill = g_memdup2(start, sizeof(igraph_integer_t) * cells);
  for (igraph_integer_t i = 0; i < n; i++)
    members[fill[cell_of[i]]++] = i;
  g_free(fill);
  igraph_vector_int_resize(edges, 2 * n * k);
  igraph_vector_resize(weights, n * k);
  Candidate *candidates = g_new(Candidate, 1024);
  for (igraph_integer_t i = 0; i < n; i++) {
    igraph_integer_t cx = cell_of[i] % side, cy = cell_of[i] / side, count = 0;
    for (int radius = 1; count < k + 1; radius++) {
      count = 0;
      for (igraph_integer_t dy = -radius; dy <= radius; dy++)
        for (igraph_integer_t dx = -radius; dx <= radius; dx++) {
          igraph_integer_t ox = cx + dx, oy = cy + dy;
          if (ox < 0 || oy < 0 || ox >= side || oy >= side)
            continue;
          igraph_integer_t c = oy * side + ox;
          for (igraph_integer_t a = start[c]; a < start[c + 1] && count < 1024; a++) {
            igraph_integer_t j = members[a];
            if (j == i)
              continue;
            candidates[count++] = (Candidate){hypot(x[i] - x[j], y[i] - y[j]), j};
          }
        }
    }
    qsort(candidates, count, sizeof *candidates, compare_candidate);
    for (igraph_integer_t r = 0; r < k; r++) {
      VECTOR(*edges)[2 * (i * k + r)] = i;
      VECTOR(*edges)[2 * (i * k + r) + 1] = candidates[r].index;
      VECTOR(*weights)[i * k + r] = candidates[r].distance;
    }
  }
  g_free(candidates);
  g_free(start);
  g_free(members);
  g_free(cell_of);
  g_free(x);
  g_free(y);
}

static void build_random_graph(GRand *rand, igraph_integer_t n, igraph_integer_t k,
                               igraph_vector_int_t *edges, igraph_vector_t *weights)
{
  igraph_vector_int_resize(edges, 2 * n * k);
  igraph_vector_resize(weights, n * k);
  for (igraph_integer_t e = 0; e < n * k; e++) {
    VECTOR(*edges)[2 * e] = e / k;
    VECTOR(*edges)[2 * e + 1] = g_rand_int_range(rand, 0, (gint32)n);
    VECTOR(*weights)[e] = g_rand_double(rand);
  }
}

static double forest_weight(const igraph_vector_t *weights, const igraph_vector_int_t *forest)
{
  double total = 0;
  for (igraph_integer_t i = 0; i < igraph_vector_int_size(forest); i++)
    total += VECTOR(*weights)[VECTOR(*forest)[i]];
  return total;
}

int main(int argc, char **argv)
{
  igraph_set_error_handler(igraph_error_handler_printignore);
  igraph_integer_t n = argc > 1 ? g_ascii_strtoll(argv[1], NULL, 10) : 1000000;
  igraph_integer_t k = argc > 2 ? g_ascii_strtoll(argv[2], NULL, 10) : 20;
  const char *kind = argc > 3 ? argv[3] : "points";
  int threads = argc > 4 ? atoi(argv[4]) : 0;
  GRand *rand = g_rand_new_with_seed(2024);
  igraph_vector_int_t edges;
  igraph_vector_t weights;
  igraph_vector_int_init(&edges, 0);
  igraph_vector_init(&weights, 0);
  gint64 t0 = g_get_monotonic_time();
  if (strcmp(kind, "random") == 0)
    build_random_graph(rand, n, k, &edges, &weights);
  else
    build_points_graph(rand, n, k, &edges, &weights);
  igraph_t graph;
  igraph_create(&graph, &edges, n, IGRAPH_DIRECTED);
  igraph_vector_int_destroy(&edges);
  printf("graph: %s, %" IGRAPH_PRId " vertices, %" IGRAPH_PRId " edges (k=%" IGRAPH_PRId
         "), built in %.2f s; CPU threads %d\n",
         kind, n, igraph_ecount(&graph), k, (g_get_monotonic_time() - t0) / 1e6,
         threads ? threads : (int)g_get_num_processors());

  igraph_vector_int_t forest, reference, membership;
  igraph_vector_int_init(&forest, 0);
  igraph_vector_int_init(&reference, 0);
  igraph_vector_int_init(&membership, 0);
  KnnwbForestOptions options;
  knnwb_clustering_forest_options_init(&options);
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = threads;
  GError *error = NULL;
  igraph_integer_t components = 0;
  t0 = g_get_monotonic_time();
  if (!knnwb_clustering_spanning_forest(&graph, &weights, &options, &forest, &membership,
                                        &components, &error)) {
    fprintf(stderr, "Borůvka failed: %s\n", error->message);
    return 1;
  }
  double cpu = (g_get_monotonic_time() - t0) / 1e6;
  printf("knnwb Borůvka CPU: %.3f s, %" IGRAPH_PRId " forest edges, %" IGRAPH_PRId
         " components, weight %.9g\n",
         cpu, igraph_vector_int_size(&forest), components, forest_weight(&weights, &forest));

  t0 = g_get_monotonic_time();
  igraph_minimum_spanning_tree(&graph, &reference, &weights);
  double prim = (g_get_monotonic_time() - t0) / 1e6;
  printf("igraph_minimum_spanning_tree: %.3f s, %" IGRAPH_PRId " edges, weight %.9g\n", prim,
         igraph_vector_int_size(&reference), forest_weight(&weights, &reference));
  printf("ratio igraph / Borůvka CPU: %.2fx\n", prim / cpu);
  double diff = fabs(forest_weight(&weights, &forest) - forest_weight(&weights, &reference));
  int status = diff <= 1e-9 * forest_weight(&weights, &reference) &&
                       igraph_vector_int_size(&forest) == igraph_vector_int_size(&reference)
                   ? 0
                   : 2;
  if (status)
    printf("MISMATCH between the two forests\n");

  if (knnwb_cuda_device_count() > 0) {
    igraph_vector_int_t gpu;
    igraph_vector_int_init(&gpu, 0);
    options.backend = KNNWB_BACKEND_CUDA;
    for (int repeat = 0; repeat < 2; repeat++) { /* the first call pays CUDA context creation */
      t0 = g_get_monotonic_time();
      if (!knnwb_clustering_spanning_forest(&graph, &weights, &options, &gpu, NULL, NULL, &error)) {
        fprintf(stderr, "GPU Borůvka failed: %s\n", error->message);
        return 1;
      }
      double seconds = (g_get_monotonic_time() - t0) / 1e6;
      printf("knnwb Borůvka GPU (%s): %.3f s (incl. host<->device copies), identical to CPU: %s, "
             "ratio igraph / GPU: %.2fx\n",
             repeat ? "warm" : "cold", seconds,
             igraph_vector_int_all_e(&gpu, &forest) ? "yes" : "NO", prim / seconds);
      if (!igraph_vector_int_all_e(&gpu, &forest))
        status = 3;
    }
    igraph_vector_int_destroy(&gpu);
  } else {
    printf("GPU Borůvka: skipped (no CUDA device or not built with CUDA)\n");
  }
  igraph_vector_int_destroy(&forest);
  igraph_vector_int_destroy(&reference);
  igraph_vector_int_destroy(&membership);
  igraph_vector_destroy(&weights);
  igraph_destroy(&graph);
  g_rand_free(rand);
  return status;
}
