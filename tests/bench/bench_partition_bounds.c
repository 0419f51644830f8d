/*
 * The partitioned search's bounds pass (core/partition/partition_visits.c) on a user's rows (not a
 * test): the partition the GPU's cost model chooses (its choice, the assignment of every row and
 * the grouping), then the bounds pass with every row's k-th distance set to KTH, as after the
 * clusters' own lists. Prints the cells, groups, the visits found and the best of REPS passes, so
 * that two builds can be compared for the same visits.
 *
 * Usage: bench_partition_bounds X.npy KTH [THREADS [REPS]]   (euclidean, k = 30; THREADS 0: all)
 * X.npy from tests/bench/make_clusters_table.py, e.g. 2,000,000 x 50 with centres 2 apart and
 * KTH 6.5 (about the rows' k-th distance there).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/knnwb.h>
#include "partition/partition_internal.h"

int main(int argc, char **argv)
{
  if (argc < 3) {
    g_printerr("usage: bench_partition_bounds X.npy KTH [THREADS [REPS]]\n");
    return 2;
  }
  const double kth = g_ascii_strtod(argv[2], NULL);
  const int threads = knnwb_thread_count(argc > 3 ? atoi(argv[3]) : 0);
  const int reps = argc > 4 ? MAX(1, atoi(argv[4])) : 3;
  const size_t k = 30;
  KnnwbReadOptions read;
  knnwb_formats_read_options_init(&read);
  g_autoptr(GError) error = NULL;
  KnnwbMatrix *data = NULL;
  if (!knnwb_formats_read_matrix(argv[1], &read, &data, NULL, &error)) {
    g_printerr("bench_partition_bounds: %s\n", error->message);
    return 1;
  }
  KnnwbPartition p;
  double share;
  gint64 start = g_get_monotonic_time();
  if (!knnwb_partition_choose(&p, data, KNNWB_METRIC_EUCLIDEAN, k, threads, TRUE, &share) ||
      !knnwb_partition_assign_all(&p, data, k, NULL, NULL, NULL, 0)) {
    g_printerr("bench_partition_bounds: no partition of these rows\n");
    knnwb_matrix_free(data);
    return 1;
  }
  knnwb_partition_group(&p, data, k, TRUE);
  printf("%zu x %zu rows: %zu cells in %zu groups (%.1f%% of the work expected), chosen in %.3f s, "
         "%d threads\n",
         data->n_rows, data->n_cols, p.m, p.groups, 100.0 * share,
         (double)(g_get_monotonic_time() - start) / 1e6, threads);
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = k;
  options.metric = KNNWB_METRIC_EUCLIDEAN;
  const size_t n = data->n_rows;
  int64_t *kth_bits = g_new(int64_t, n);
  for (size_t i = 0; i < n; i++)
    memcpy(&kth_bits[i], &kth, sizeof kth);
  double best = HUGE_VAL;
  for (int r = 0; r < reps; r++) {
    KnnwbPartitionRun run = {.data = data,
                             .options = &options,
                             .p = &p,
                             .k = k,
                             .d = p.d,
                             .first = 0,
                             .last = n,
                             .kth = kth_bits};
    double pairs = 0.0;
    start = g_get_monotonic_time();
    const gboolean ok = knnwb_partition_visits(&run, &pairs);
    const double seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    best = MIN(best, seconds);
    printf("bounds pass %.3f s: %" G_GINT64_FORMAT " visits, %.4g pairs%s\n", seconds,
           run.query_start[p.groups], pairs, ok ? "" : " (failed)");
    g_free(run.query_start);
    g_free(run.queries);
  }
  printf("best %.3f s\n", best);
  g_free(kth_bits);
  knnwb_partition_clear(&p);
  knnwb_matrix_free(data);
  return 0;
}
