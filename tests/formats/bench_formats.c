/*
 * Loading benchmark (not a test): writes a deterministic rows x cols expression matrix as TSV and
 * as NPY, then times knnwb_formats_read_matrix on each in a child process (so each peak RSS is its
 * own) and prints seconds, MB/s and peak RSS against the matrix size.
 *
 * usage: bench_formats [rows [cols [directory]]] [--cold] [--keep]
 *   defaults: 1533876 295 $TMPDIR; --cold evicts the file from the page cache before loading;
 *   --keep leaves the generated files.
 */
#include <knnwb/error.h>
#include <knnwb/formats.h>
#include <knnwb/matrix.h>

#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* A value in [-20, 20) with 4 decimals, as an integer of ten-thousandths: realistic log-ratio
 * expression data prints like "-3.1416" (about 7.7 bytes per field with the tab). */
static int32_t bench_value(uint64_t i, uint64_t j)
{
  uint64_t x = i * 0x9E3779B97F4A7C15ull ^ (j + 1) * 0xC2B2AE3D27D4EB4Full;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return (int32_t)(x % 400000) - 200000;
}

static size_t bench_format(int32_t v, char *out)
{
  char *p = out;
  if (v < 0) {
    *p++ = '-';
    v = -v;
  }
  int32_t whole = v / 10000, frac = v % 10000;
  if (whole >= 10)
    *p++ = (char)('0' + whole / 10);
  *p++ = (char)('0' + whole % 10);
  *p++ = '.';
  p[0] = (char)('0' + frac / 1000);
  p[1] = (char)('0' + frac / 100 % 10);
  p[2] = (char)('0' + frac / 10 % 10);
  p[3] = (char)('0' + frac % 10);
  return (size_t)(p + 4 - out);
}

static double bench_now(void)
{
  return (double)g_get_monotonic_time() / 1e6;
}

static void bench_write_tsv(const char *path, size_t rows, size_t cols)
{
  FILE *f = fopen(path, "w");
  g_assert_nonnull(f);
  static char buffer[1 << 22];
  setvbuf(f, buffer, _IOFBF, sizeof buffer);
  fputs("probe", f);
  for (size_t j = 0; j < cols; j++)
    fprintf(f, "\tS%zu", j + 1);
  fputc('\n', f);
  char *line = g_malloc(32 + cols * 16);
  for (size_t i = 0; i < rows; i++) {
    size_t n = (size_t)sprintf(line, "P%zu", i + 1);
    for (size_t j = 0; j < cols; j++) {
      line[n++] = '\t';
      n += bench_format(bench_value(i, j), line + n);
    }
    line[n++] = '\n';
    fwrite(line, 1, n, f);
  }
  g_free(line);
  g_assert_cmpint(fclose(f), ==, 0);
}

static void bench_write_npy(const char *path, size_t rows, size_t cols)
{
  FILE *f = fopen(path, "w");
  g_assert_nonnull(f);
  char dict[128];
  int n = snprintf(dict, sizeof dict,
                   "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", rows, cols);
  size_t total = 10 + (size_t)n + 1;
  size_t padded = (total + 63) / 64 * 64;
  unsigned short header_length = (unsigned short)(padded - 10);
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fputc(header_length & 0xff, f);
  fputc(header_length >> 8, f);
  fputs(dict, f);
  for (size_t k = 10 + (size_t)n; k < padded - 1; k++)
    fputc(' ', f);
  fputc('\n', f);
  float *row = g_new(float, cols);
  char text[16];
  for (size_t i = 0; i < rows; i++) {
    for (size_t j = 0; j < cols; j++) {
      text[bench_format(bench_value(i, j), text)] = '\0';
      row[j] = strtof(text, NULL);
    }
    fwrite(row, sizeof(float), cols, f);
  }
  g_free(row);
  g_assert_cmpint(fclose(f), ==, 0);
}

static void bench_evict(const char *path)
{
  int fd = open(path, O_RDONLY);
  if (fd >= 0) {
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
}

/* Loads in a child so that ru_maxrss is this load's alone. Returns the child's exit status. */
static int bench_load(const char *what, const char *path, size_t rows, size_t cols, gboolean cold)
{
  if (cold)
    bench_evict(path);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    struct rusage before;
    getrusage(RUSAGE_SELF, &before);
    KnnwbReadOptions options;
    knnwb_formats_read_options_init(&options);
    KnnwbReadInfo info;
    GError *error = NULL;
    KnnwbMatrix *matrix = NULL;
    double start = bench_now();
    gboolean ok = knnwb_formats_read_matrix(path, &options, &matrix, &info, &error);
    double seconds = bench_now() - start;
    if (!ok) {
      fprintf(stderr, "%s: %s\n", what, error->message);
      _exit(1);
    }
    struct rusage after;
    getrusage(RUSAGE_SELF, &after);
    /* Spot checks: the parsed floats equal strtof of the text written. */
    GRand *rand = g_rand_new_with_seed(7);
    for (int t = 0; t < 1000; t++) {
      size_t i = (size_t)g_rand_int_range(rand, 0, (gint32)rows);
      size_t j = (size_t)g_rand_int_range(rand, 0, (gint32)cols);
      char text[16];
      text[bench_format(bench_value(i, j), text)] = '\0';
      if (matrix->values[i * cols + j] != strtof(text, NULL)) {
        fprintf(stderr, "%s: value (%zu, %zu) is %.9g, expected %s\n", what, i, j,
                matrix->values[i * cols + j], text);
        _exit(2);
      }
    }
    g_rand_free(rand);
    struct stat st;
    stat(path, &st);
    double matrix_bytes = (double)rows * (double)cols * sizeof(float);
    double peak = (double)after.ru_maxrss * 1024.0;
    printf("%-4s %zu x %zu: %.2f s, %.0f MB/s of file (%.2f GB), peak RSS %.2f GB = %.2fx the "
           "matrix (%.2f GB)%s%s\n",
           what, matrix->n_rows, matrix->n_cols, seconds, (double)st.st_size / seconds / 1e6,
           (double)st.st_size / 1e9, peak / 1e9, peak / matrix_bytes, matrix_bytes / 1e9,
           info.mapped ? ", memory-mapped" : "", cold ? ", cold cache" : ", warm cache");
    fflush(stdout);
    if (matrix->n_rows != rows || matrix->n_cols != cols)
      _exit(3);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

int main(int argc, char **argv)
{
  size_t rows = 1533876, cols = 295;
  const char *directory = g_get_tmp_dir();
  gboolean cold = FALSE, keep = FALSE;
  int positional = 0;
  for (int a = 1; a < argc; a++) {
    if (strcmp(argv[a], "--cold") == 0)
      cold = TRUE;
    else if (strcmp(argv[a], "--keep") == 0)
      keep = TRUE;
    else if (positional == 0 && ++positional)
      rows = strtoull(argv[a], NULL, 10);
    else if (positional == 1 && ++positional)
      cols = strtoull(argv[a], NULL, 10);
    else
      directory = argv[a];
  }
  if (rows == 0 || cols == 0) {
    fprintf(stderr, "usage: %s [rows [cols [directory]]] [--cold] [--keep]\n", argv[0]);
    return 2;
  }
  g_autofree char *tsv = g_build_filename(directory, "knnwb-bench.tsv", NULL);
  g_autofree char *npy = g_build_filename(directory, "knnwb-bench.npy", NULL);
  double start = bench_now();
  bench_write_tsv(tsv, rows, cols);
  printf("generated %s in %.1f s\n", tsv, bench_now() - start);
  int status = bench_load("tsv", tsv, rows, cols, cold);
  if (!keep)
    g_unlink(tsv);
  start = bench_now();
  bench_write_npy(npy, rows, cols);
  printf("generated %s in %.1f s\n", npy, bench_now() - start);
  status |= bench_load("npy", npy, rows, cols, cold);
  if (!keep)
    g_unlink(npy);
  return status;
}
