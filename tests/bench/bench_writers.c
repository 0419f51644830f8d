/*
 * Writer benchmark (not a test): neighbour lists of n rows x k shaped like a Pearson kNN graph
 * (distances in [0, 1) with full double precision, neighbours anywhere) written as .knn, .tsv,
 * .mtx, .npy and .npz straight from the lists, and the union graph's GML with coordinates given
 * (no layout), each timed and reported in MB/s of output.
 *
 * Usage: bench_writers [--rows N] [--k K] [--threads T] [--dir DIR] [--keep]
 * Defaults: 1,533,876 rows (expanded_B), k = 20, all cores, $TMPDIR. Without --keep the files are
 * removed after each measurement (the next write then does not pay for replacing a big file).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <glib/gstdio.h>
#include <knnwb/knnwb.h>

static double bench_now(void)
{
  return (double)g_get_monotonic_time() / 1e6;
}

static guint64 bench_size(const char *path)
{
  GStatBuf st;
  return g_stat(path, &st) == 0 ? (guint64)st.st_size : 0;
}

int main(int argc, char **argv)
{
  gint64 rows = 1533876, k = 20;
  int threads = 0;
  char *dir = NULL;
  gboolean keep = FALSE;
  GOptionEntry entries[] = {{"rows", 'n', 0, G_OPTION_ARG_INT64, &rows, "rows", "N"},
                            {"k", 'k', 0, G_OPTION_ARG_INT64, &k, "neighbours per row", "K"},
                            {"threads", 't', 0, G_OPTION_ARG_INT, &threads, "threads", "T"},
                            {"dir", 'd', 0, G_OPTION_ARG_FILENAME, &dir, "output directory", "DIR"},
                            {"keep", 0, 0, G_OPTION_ARG_NONE, &keep, "keep the files", NULL},
                            {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new(NULL);
  g_option_context_add_main_entries(context, entries, NULL);
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error) || rows < 2 || k < 1 || k >= rows) {
    g_printerr("bench_writers: %s\n", error ? error->message : "bad sizes");
    return 2;
  }
  if (dir == NULL)
    dir = g_strdup(g_get_tmp_dir());
  size_t n = (size_t)rows, kk = (size_t)k;
  KnnwbNeighbors nb = {.n_queries = n, .k = kk};
  nb.indices = g_new(int64_t, n * kk);
  nb.distances = g_new(double, n * kk);
  nb.n_found = g_new(int32_t, n);
  nb.backend_used = g_strdup("synthetic");
  GRand *rand = g_rand_new_with_seed(7);
  for (size_t i = 0; i < n; i++) {
    nb.n_found[i] = (int32_t)kk;
    double d = g_rand_double_range(rand, 0.0, 0.2);
    for (size_t r = 0; r < kk; r++) {
      size_t j = (size_t)g_rand_int_range(rand, 0, (gint32)MIN(n, (size_t)G_MAXINT32));
      nb.indices[i * kk + r] = (int64_t)(j == i ? (i + 1) % n : j);
      d += g_rand_double_range(rand, 0.0, 0.02);
      nb.distances[i * kk + r] = d;
    }
  }
  g_rand_free(rand);
  KnnwbWriteControl control = {.n_threads = threads};
  printf("bench_writers: %zu rows x k=%zu, %d threads, directory %s\n", n, kk,
         threads > 0 ? threads : (int)g_get_num_processors(), dir);
  printf("%-8s %10s %10s %10s\n", "format", "bytes", "seconds", "MB/s");
  const char *names[] = {"g.knn", "g.tsv", "g.mtx", "g.npy", "g.npz"};
  for (size_t f = 0; f < G_N_ELEMENTS(names); f++) {
    g_autofree char *path = g_build_filename(dir, names[f], NULL);
    double start = bench_now();
    if (!knnwb_formats_write_lists(path, KNNWB_OUTPUT_AUTO, &nb, NULL, &control, &error)) {
      g_printerr("bench_writers: %s\n", error->message);
      return 1;
    }
    double seconds = bench_now() - start;
    guint64 bytes = bench_size(path);
    KnnwbOutputFormat format;
    knnwb_formats_output_from_path(path, &format, NULL);
    g_autofree char *side = knnwb_formats_side_path(path, format);
    if (side != NULL)
      bytes += bench_size(side);
    printf("%-8s %10" G_GUINT64_FORMAT " %10.3f %10.0f\n", names[f] + 2, bytes, seconds,
           (double)bytes / seconds / 1e6);
    fflush(stdout);
    if (!keep) {
      g_unlink(path);
      if (side != NULL)
        g_unlink(side);
    }
  }
  g_free(nb.indices);
  g_free(nb.distances);
  g_free(nb.n_found);
  g_free(nb.backend_used);
  g_free(dir);
  return 0;
}
