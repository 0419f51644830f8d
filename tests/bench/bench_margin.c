/*
 * The margin planner's time (not a test): knnwb_margin_choose on synthetic rows, as a first round
 * under an FP16 screen calls it (32 sample rows, kc from the screen, a cap of 4 kc).
 *
 * Usage: bench_margin pearson|euclidean N D [K [THREADS [REPS]]]   (defaults K 30, THREADS 2,
 * REPS 5)
 * pearson: standard normal rows (centred and normalised by the preparation). euclidean: 50
 * Gaussian clusters, centres N(0, 3^2), unit noise (tests/bench/make_clusters_table.py's shape).
 * Prints the best of REPS calls, the choice and a checksum of the sample rows' counts, so that two
 * builds can be compared for the same decisions; then the best of REPS fits of the centroids that
 * the GPU's tile loop groups the rows by (knnwb_row_order_centroids, fitted beside the planner).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/knnwb.h>
#include "engine/engine_internal.h"

#define BENCH_SAMPLE 32

/* splitmix64: fast, and the same rows on every machine. */
static uint64_t bench_next(uint64_t *state)
{
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double bench_uniform(uint64_t *state)
{
  return ((double)(bench_next(state) >> 11) + 0.5) / 9007199254740992.0;
}

static double bench_normal(uint64_t *state)
{
  const double u = bench_uniform(state), v = bench_uniform(state);
  return sqrt(-2.0 * log(u)) * cos(2.0 * G_PI * v);
}

static KnnwbMatrix *bench_rows(gboolean clusters, size_t n, size_t d)
{
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  uint64_t state = 1;
  double *centre = g_new(double, 50 * d);
  for (size_t i = 0; i < 50 * d; i++)
    centre[i] = 3.0 * bench_normal(&state);
  for (size_t i = 0; i < n; i++) {
    const size_t c = clusters ? (size_t)(bench_next(&state) % 50) : 0;
    for (size_t j = 0; j < d; j++)
      m->values[i * d + j] = (float)((clusters ? centre[c * d + j] : 0.0) + bench_normal(&state));
  }
  g_free(centre);
  return m;
}

int main(int argc, char **argv)
{
  if (argc < 4) {
    fprintf(stderr, "usage: bench_margin pearson|euclidean N D [K [THREADS [REPS]]]\n");
    return 2;
  }
  const gboolean euclidean = strcmp(argv[1], "euclidean") == 0;
  const size_t n = strtoull(argv[2], NULL, 10), d = strtoull(argv[3], NULL, 10);
  const size_t k = argc > 4 ? strtoull(argv[4], NULL, 10) : 30;
  const int threads = argc > 5 ? atoi(argv[5]) : 2, reps = argc > 6 ? atoi(argv[6]) : 5;
  g_autoptr(KnnwbMatrix) m = bench_rows(euclidean, n, d);
  KnnwbPrepared p;
  g_autoptr(GError) error = NULL;
  if (!knnwb_prepared_init(&p, m, euclidean ? KNNWB_METRIC_EUCLIDEAN : KNNWB_METRIC_PEARSON, FALSE,
                           "data", threads, NULL, NULL, &error)) {
    fprintf(stderr, "bench_margin: %s\n", error->message);
    return 1;
  }
  knnwb_prepared_set_screen(&p, &p, KNNWB_SCREEN_FP16);
  const size_t kc = knnwb_screen_candidates(KNNWB_SCREEN_FP16, k);
  double best = INFINITY;
  size_t chosen = 0, needed[BENCH_SAMPLE];
  for (int rep = 0; rep < reps; rep++) {
    const gint64 start = g_get_monotonic_time();
    chosen = knnwb_margin_choose(&p, &p, TRUE, 0, n, k, kc, n - 1, 4 * kc, BENCH_SAMPLE, threads,
                                 NULL, needed);
    best = MIN(best, (double)(g_get_monotonic_time() - start) / 1e6);
  }
  uint64_t checksum = 0;
  for (size_t s = 0; s < BENCH_SAMPLE; s++)
    checksum = checksum * 1000003u + needed[s];
  printf("%s %zu x %zu, k %zu, kc %zu, %d threads: best of %d %.4f s, chosen %zu, counts %016llx\n",
         argv[1], n, d, k, kc, threads, reps, best, chosen, (unsigned long long)checksum);
  /* the centroids the GPU's tile loop groups the rows by, fitted beside the planner */
  double fit = INFINITY;
  size_t cells = 0;
  for (int rep = 0; rep < reps; rep++) {
    const gint64 start = g_get_monotonic_time();
    g_free(knnwb_row_order_centroids(&p, threads, &cells));
    fit = MIN(fit, (double)(g_get_monotonic_time() - start) / 1e6);
  }
  printf("row order: %zu centroids fitted, best of %d %.4f s\n", cells, reps, fit);
  knnwb_prepared_clear(&p);
  return 0;
}
