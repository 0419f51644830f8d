/*
 * How long the ranks take to write .npy neighbour lists (the indices file and its distances side
 * file, every rank its rows' slices at their offsets: knnwb_distributed_write_lists), measured
 * without a kNN run before it, and whether the bytes are right. Each rank makes its block of
 * --rows x --k lists (blocks of uneven size when the ranks do not divide the rows) from a formula,
 * the ranks write them --reps times (the files removed before each), and rank 0 reads both files
 * back and checks every value. Run alone (no mpirun), one process writes them
 * (knnwb_formats_write_lists), for comparison. --over-old writes them over files 1 MB longer than
 * theirs (the ranks must cut them to their length) instead of removing them.
 * Usage: [mpirun -np R] bench_write [--rows N] [--k K] [--reps R] [--output OUT.npy] [--over-old]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <glib.h>
#include <knnwb/distributed.h>
#include <knnwb/formats.h>
#include <knnwb/knn.h>
#include <knnwb/knn_group.h>

/* Row i's r-th neighbour and its distance: distinct for every slot, so a misplaced slice shows. */
static int64_t knnwb_bench_index(size_t i, size_t r, size_t n)
{
  return (int64_t)((i * 7919 + r * 104729 + 1) % n);
}

static double knnwb_bench_distance(size_t i, size_t r)
{
  return (double)i + (double)r / 1024.0;
}

/* This rank's block of rows of n: rows first .. first + count - 1. */
static KnnwbNeighbors *knnwb_bench_block(size_t n, size_t k, int rank, int ranks)
{
  KnnwbNeighbors *own = g_new0(KnnwbNeighbors, 1);
  own->first_row = n * (size_t)rank / (size_t)ranks;
  own->n_queries = n * (size_t)(rank + 1) / (size_t)ranks - own->first_row;
  own->k = k;
  own->indices = g_new(int64_t, MAX(own->n_queries * k, 1));
  own->distances = g_new(double, MAX(own->n_queries * k, 1));
  own->n_found = g_new(int32_t, MAX(own->n_queries, 1));
  for (size_t q = 0; q < own->n_queries; q++) {
    own->n_found[q] = (int32_t)k;
    for (size_t r = 0; r < k; r++) {
      own->indices[q * k + r] = knnwb_bench_index(own->first_row + q, r, n);
      own->distances[q * k + r] = knnwb_bench_distance(own->first_row + q, r);
    }
  }
  return own;
}

/* Both files as the formula says: the NPY header's length, then n x k values. */
static gboolean knnwb_bench_check(const char *path, size_t n, size_t k)
{
  g_autofree char *side = knnwb_formats_side_path(path, KNNWB_OUTPUT_NPY);
  const char *paths[2] = {path, side};
  for (int a = 0; a < 2; a++) {
    g_autofree char *bytes = NULL;
    gsize length = 0;
    if (!g_file_get_contents(paths[a], &bytes, &length, NULL) || length < 10) {
      fprintf(stderr, "bench_write: cannot read %s\n", paths[a]);
      return FALSE;
    }
    size_t header = 10 + ((size_t)(guint8)bytes[8] | (size_t)(guint8)bytes[9] << 8);
    if (length != header + n * k * 8) {
      fprintf(stderr, "bench_write: %s holds %zu bytes, not %zu\n", paths[a], (size_t)length,
              header + n * k * 8);
      return FALSE;
    }
    for (size_t i = 0; i < n; i++)
      for (size_t r = 0; r < k; r++) {
        const char *at = bytes + header + (i * k + r) * 8;
        int64_t index;
        double distance;
        memcpy(&index, at, 8);
        memcpy(&distance, at, 8);
        if (a == 0 ? index != knnwb_bench_index(i, r, n) : distance != knnwb_bench_distance(i, r)) {
          fprintf(stderr, "bench_write: %s: row %zu, slot %zu is wrong\n", paths[a], i, r);
          return FALSE;
        }
      }
  }
  return TRUE;
}

int main(int argc, char **argv)
{
  const KnnwbKnnGroup *group = NULL;
  GError *error = NULL;
  if (!knnwb_distributed_init(&argc, &argv, &group, &error)) {
    fprintf(stderr, "bench_write: %s\n", error->message);
    return 1;
  }
  gint64 rows = 1000000, k = 30, reps = 3;
  gboolean over_old = FALSE;
  g_autofree char *output = NULL;
  GOptionEntry entries[] = {
      {"rows", 0, 0, G_OPTION_ARG_INT64, &rows, "rows of lists", "N"},
      {"k", 0, 0, G_OPTION_ARG_INT64, &k, "neighbours per row", "K"},
      {"reps", 0, 0, G_OPTION_ARG_INT64, &reps, "repetitions", "R"},
      {"over-old", 0, 0, G_OPTION_ARG_NONE, &over_old, "write over longer files", NULL},
      {"output", 0, 0, G_OPTION_ARG_FILENAME, &output, "the .npy written", "OUT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new("- .npy lists write time");
  g_option_context_add_main_entries(context, entries, NULL);
  if (!g_option_context_parse(context, &argc, &argv, &error) || rows < 1 || k < 1) {
    fprintf(stderr, "bench_write: %s\n", error ? error->message : "rows and k must be >= 1");
    return 2;
  }
  const char *path = output != NULL ? output : "bench-write.npy";
  g_autofree char *side = knnwb_formats_side_path(path, KNNWB_OUTPUT_NPY);
  const int rank = group ? group->rank : 0, ranks = group ? group->size : 1;
  g_autoptr(KnnwbNeighbors) own = knnwb_bench_block((size_t)rows, (size_t)k, rank, ranks);
  gboolean ok = TRUE;
  for (gint64 rep = 0; ok && rep < reps; rep++) {
    if (rank == 0) {
      unlink(path);
      unlink(side);
      if (over_old) {
        const gsize longer = (gsize)rows * (gsize)k * 8 + (1 << 20);
        g_autofree char *old = g_malloc(longer);
        memset(old, 'x', longer);
        if (!g_file_set_contents(path, old, (gssize)longer, NULL) ||
            !g_file_set_contents(side, old, (gssize)longer, NULL))
          ok = FALSE;
      }
    }
    if (group != NULL)
      group->agree(group, TRUE, NULL);
    gint64 start = g_get_monotonic_time();
    ok = group != NULL ? knnwb_distributed_write_lists(group, path, KNNWB_OUTPUT_NPY, own,
                                                       (size_t)rows, NULL, NULL, &error)
                       : knnwb_formats_write_lists(path, KNNWB_OUTPUT_NPY, own, NULL, NULL, &error);
    double seconds = (double)(g_get_monotonic_time() - start) / 1e6;
    if (ok && rank == 0)
      printf("%d rank(s): %" G_GINT64_FORMAT " x %" G_GINT64_FORMAT " lists (%.2f GB) in %.3f s\n",
             ranks, rows, k, (double)rows * (double)k * 16 / 1e9, seconds);
  }
  if (!ok)
    fprintf(stderr, "bench_write: %s\n", error->message);
  if (ok && rank == 0 && !knnwb_bench_check(path, (size_t)rows, (size_t)k))
    ok = FALSE;
  if (group != NULL && !group->agree(group, ok, NULL))
    ok = FALSE;
  if (rank == 0) {
    unlink(path);
    unlink(side);
  }
  g_clear_error(&error);
  knnwb_distributed_finalize();
  return ok ? 0 : 1;
}
