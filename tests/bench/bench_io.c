/*
 * Input and output benchmark (not a test): the two I/O phases of `knnwb knn X.npy -o g.npy`
 * timed apart from the search, which needs a GPU at the sizes that matter.
 *
 *   bench_io read FILE.npy [--repeat R] [--threads T]
 *     reads FILE as `knnwb knn` does (knnwb_formats_read_matrix with a cancel flag and a progress
 *     callback, missing values an error) R times; prints seconds and GB/s of each read, and two
 *     floors: one pread of the data into a fresh buffer (first-touch page faults included) and
 *     into a buffer already touched (the copy from the page cache alone).
 *   bench_io write --rows N --k K [--dir DIR] [--repeat R] [--threads T]
 *     writes synthetic n x k lists as OUT.npy + OUT.distances.npy (knnwb_formats_write_lists, with
 *     its temporaries and fsyncs) R times, removing them between runs; prints seconds and GB/s,
 *     and a floor: the same bytes written by one write(2) per file and fsynced, timed apart.
 *
 * Both print one line per measurement, "phase what seconds GB/s", for logs (io_check.sh).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <glib/gstdio.h>
#include <knnwb/knnwb.h>

static double bench_now(void)
{
  return (double)g_get_monotonic_time() / 1e6;
}

static void bench_progress(uint64_t done, uint64_t total, void *data)
{
  (void)done;
  (void)total;
  (void)data;
}

static const char *bench_threads(int threads)
{
  static char text[16];
  if (threads <= 0)
    return "all";
  g_snprintf(text, sizeof text, "%d", threads);
  return text;
}

static void bench_line(const char *phase, const char *what, double seconds, double bytes)
{
  printf("%-6s %-40s %8.3f s %7.2f GB/s\n", phase, what, seconds, bytes / seconds / 1e9);
  fflush(stdout);
}

/* The data floors: one pread of the file's bytes after its first 128 (an NPY v1 header as numpy
 * writes it) into a fresh buffer, then into the same buffer again. */
static void bench_read_floor(const char *path)
{
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return;
  off_t size = lseek(fd, 0, SEEK_END);
  size_t bytes = size > 128 ? (size_t)size - 128 : 0;
  char *buffer = malloc(MAX(bytes, (size_t)1));
  for (int pass = 0; pass < 2 && buffer != NULL; pass++) {
    double start = bench_now();
    size_t done = 0;
    while (done < bytes) {
      ssize_t got = pread(fd, buffer + done, bytes - done, (off_t)(128 + done));
      if (got <= 0)
        break;
      done += (size_t)got;
    }
    g_autofree char *what = g_strdup_printf("floor %zu MB: pread, %s", bytes / 1000000,
                                            pass == 0 ? "fresh buffer" : "touched");
    bench_line("read", what, bench_now() - start, (double)done);
  }
  free(buffer);
  close(fd);
}

static int bench_read(const char *path, int repeat, int threads)
{
  for (int r = 0; r < repeat; r++) {
    KnnwbReadOptions options;
    knnwb_formats_read_options_init(&options);
    volatile gint cancel = 0;
    options.cancel = &cancel;
    options.progress = bench_progress;
    options.n_threads = threads;
    KnnwbMatrix *matrix = NULL;
    g_autoptr(GError) error = NULL;
    double start = bench_now();
    if (!knnwb_formats_read_matrix(path, &options, &matrix, NULL, &error)) {
      g_printerr("bench_io: %s\n", error->message);
      return 1;
    }
    double seconds = bench_now() - start;
    g_autofree char *what = g_strdup_printf("knnwb %zu x %zu, %s threads", matrix->n_rows,
                                            matrix->n_cols, bench_threads(threads));
    bench_line("read", what, seconds, (double)matrix->n_rows * matrix->n_cols * 4);
    knnwb_matrix_free(matrix);
  }
  bench_read_floor(path);
  return 0;
}

/* One write(2) of the header and the data, then fsync, timed apart. */
static void bench_write_floor(const char *path, const void *data, size_t bytes)
{
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return;
  double start = bench_now();
  size_t done = 0;
  while (done < bytes) {
    ssize_t put = write(fd, (const char *)data + done, bytes - done);
    if (put <= 0)
      break;
    done += (size_t)put;
  }
  double written = bench_now();
  (void)fsync(fd);
  double synced = bench_now();
  close(fd);
  g_autofree char *write_what = g_strdup_printf("floor %zu MB: write(2)", bytes / 1000000);
  g_autofree char *sync_what = g_strdup_printf("floor %zu MB: fsync", bytes / 1000000);
  bench_line("write", write_what, written - start, (double)bytes);
  bench_line("write", sync_what, synced - written, (double)bytes);
  g_unlink(path);
}

static int bench_write(gint64 rows, gint64 k, const char *dir, int repeat, int threads)
{
  size_t n = (size_t)rows, kk = (size_t)k;
  KnnwbNeighbors nb = {.n_queries = n, .k = kk};
  nb.indices = g_new(int64_t, n * kk);
  nb.distances = g_new(double, n *kk);
  nb.n_found = g_new(int32_t, n);
  guint32 state = 7;
  for (size_t i = 0; i < n; i++) {
    nb.n_found[i] = (int32_t)kk;
    double d = 0.0;
    for (size_t r = 0; r < kk; r++) {
      state = state * 1664525u + 1013904223u;
      nb.indices[i * kk + r] = (int64_t)(state % n);
      d += (double)(state >> 8) * 0x1p-30;
      nb.distances[i * kk + r] = d;
    }
  }
  g_autofree char *path = g_build_filename(dir, "bench_io_lists.npy", NULL);
  g_autofree char *side = knnwb_formats_side_path(path, KNNWB_OUTPUT_NPY);
  double bytes = 2.0 * (double)(n * kk * 8);
  volatile gint cancel = 0;
  KnnwbWriteControl control = {.n_threads = threads, .cancel = &cancel, .progress = bench_progress};
  int status = 0;
  for (int r = 0; r < repeat && status == 0; r++) {
    g_autoptr(GError) error = NULL;
    double start = bench_now();
    if (!knnwb_formats_write_lists(path, KNNWB_OUTPUT_NPY, &nb, NULL, &control, &error)) {
      g_printerr("bench_io: %s\n", error->message);
      status = 1;
    } else {
      g_autofree char *what =
          g_strdup_printf("knnwb %zu x %zu .npy, %s threads", n, kk, bench_threads(threads));
      bench_line("write", what, bench_now() - start, bytes);
    }
    g_unlink(path);
    g_unlink(side);
  }
  if (status == 0) {
    bench_write_floor(path, nb.indices, n * kk * 8);
    bench_write_floor(side, nb.distances, n * kk * 8);
  }
  g_free(nb.indices);
  g_free(nb.distances);
  g_free(nb.n_found);
  return status;
}

int main(int argc, char **argv)
{
  gint64 rows = 1533876, k = 20;
  int threads = 0, repeat = 3;
  g_autofree char *dir = NULL;
  GOptionEntry entries[] = {{"rows", 'n', 0, G_OPTION_ARG_INT64, &rows, "write: rows", "N"},
                            {"k", 'k', 0, G_OPTION_ARG_INT64, &k, "write: neighbours per row", "K"},
                            {"threads", 't', 0, G_OPTION_ARG_INT, &threads, "threads", "T"},
                            {"repeat", 'r', 0, G_OPTION_ARG_INT, &repeat, "runs", "R"},
                            {"dir", 'd', 0, G_OPTION_ARG_FILENAME, &dir, "output directory", "DIR"},
                            {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new("read FILE.npy | write");
  g_option_context_add_main_entries(context, entries, NULL);
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error) || argc < 2 || repeat < 1) {
    g_printerr("bench_io: %s\n", error ? error->message : "usage: bench_io read FILE | write");
    return 2;
  }
  if (g_str_equal(argv[1], "read") && argc == 3)
    return bench_read(argv[2], repeat, threads);
  if (g_str_equal(argv[1], "write") && argc == 2 && rows >= 2 && k >= 1)
    return bench_write(rows, k, dir != NULL ? dir : g_get_tmp_dir(), repeat, threads);
  g_printerr("bench_io: usage: bench_io read FILE.npy | bench_io write --rows N --k K\n");
  return 2;
}
