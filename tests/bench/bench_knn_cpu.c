/*
 * CPU engine benchmark (not a test): exact Pearson kNN graphs of deterministic synthetic
 * expression-like matrices, timed end to end (prepare + select + exact refinement), with FAISS
 * IndexFlatIP timed on the same normalised rows in the same run when python3-faiss is installed.
 *
 * Usage: bench_knn_cpu [--threads N] [--quick]
 * GFLOP/s counts the arithmetic a symmetric engine must do: n^2 d multiply-adds (= n(n-1)/2 pairs
 * x d x 2 flops), the same count for FAISS (which does 2 n^2 d) so the rates compare the work done.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <glib/gstdio.h>
#include <knnwb/knnwb.h>

/* Planted co-expression modules plus noise, like a filtered microarray. */
static KnnwbMatrix *bench_matrix(size_t n, size_t d, guint32 seed)
{
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  g_autoptr(GRand) rng = g_rand_new_with_seed(seed);
  const size_t modules = 50;
  float *patterns = g_new(float, modules * d);
  for (size_t i = 0; i < modules * d; i++)
    patterns[i] = (float)g_rand_double_range(rng, -1, 1);
  for (size_t i = 0; i < n; i++) {
    size_t module = (size_t)g_rand_int_range(rng, 0, (gint32)modules);
    double strength = g_rand_double_range(rng, 0.0, 2.0);
    for (size_t j = 0; j < d; j++) {
      /* Box-Muller-free noise: sum of uniforms is close enough to normal for a benchmark. */
      double noise = g_rand_double(rng) + g_rand_double(rng) + g_rand_double(rng) - 1.5;
      m->values[i * d + j] = (float)(8.0 + strength * patterns[module * d + j] + noise);
    }
  }
  g_free(patterns);
  return m;
}

static double bench_now(void)
{
  return (double)g_get_monotonic_time() / 1e6;
}

static const char *bench_python(void)
{
  return g_file_test("/usr/bin/python3", G_FILE_TEST_IS_EXECUTABLE) ? "/usr/bin/python3" : "python3";
}

/* Runs FAISS on the centred, normalised rows (what Pearson is an inner product of). */
static double bench_faiss(const KnnwbMatrix *m, size_t k)
{
  const size_t n = m->n_rows, d = m->n_cols;
  float *normalised = g_new(float, n * d);
  for (size_t i = 0; i < n; i++) {
    const float *x = m->values + i * d;
    double mean = 0, ss = 0;
    for (size_t j = 0; j < d; j++)
      mean += x[j];
    mean /= (double)d;
    for (size_t j = 0; j < d; j++)
      ss += (x[j] - mean) * (x[j] - mean);
    for (size_t j = 0; j < d; j++)
      normalised[i * d + j] = (float)((x[j] - mean) / sqrt(ss));
  }
  g_autofree char *path = g_build_filename(g_get_tmp_dir(), "knnwb-bench-faiss.f32", NULL);
  gboolean written = g_file_set_contents(path, (const char *)normalised, (gssize)(n * d * sizeof(float)), NULL);
  g_free(normalised);
  if (!written)
    return -1;
  g_autofree char *script = g_build_filename(KNNWB_SOURCE_DIR, "tests", "bench", "faiss_baseline.py", NULL);
  g_autofree char *n_text = g_strdup_printf("%zu", n);
  g_autofree char *d_text = g_strdup_printf("%zu", d);
  g_autofree char *k_text = g_strdup_printf("%zu", k);
  const char *argv[] = {bench_python(), script, path, n_text, d_text, k_text, NULL};
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  int status = 0;
  double seconds = -1;
  if (g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err, &status, NULL) &&
      g_spawn_check_wait_status(status, NULL)) {
    const char *line = strstr(out, "faiss_seconds ");
    if (line != NULL)
      seconds = g_ascii_strtod(line + strlen("faiss_seconds "), NULL);
  } else {
    g_printerr("  (FAISS not available: %s)\n", err && *err ? g_strstrip(err) : "python3-faiss missing");
  }
  g_remove(path);
  return seconds;
}

static void bench_case(size_t n, size_t d, size_t k, int threads)
{
  g_autoptr(KnnwbMatrix) m = bench_matrix(n, d, (guint32)(n + d));
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = KNNWB_METRIC_PEARSON;
  options.k = k;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = threads;
  g_autoptr(GError) error = NULL;
  /* Best of three, like FAISS's own benchmarks; the first run also warms OpenBLAS. */
  double best = INFINITY;
  for (int rep = 0; rep < 3; rep++) {
    g_autoptr(KnnwbNeighbors) nb = NULL;
    double start = bench_now();
    if (!knnwb_knn_self(m, &options, &nb, &error)) {
      g_printerr("knnwb failed: %s\n", error->message);
      return;
    }
    best = MIN(best, bench_now() - start);
  }
  double flops = (double)n * (double)n * (double)d; /* n^2 d multiply-adds = n(n-1)/2 pairs x 2d flops */
  double faiss = INFINITY;
  for (int rep = 0; rep < 3; rep++) {
    double s = bench_faiss(m, k);
    if (s < 0)
      break;
    faiss = MIN(faiss, s);
  }
  printf("| %zu x %zu, pearson, k=%zu | %d | %.3f s | %.1f | ", n, d, k, threads, best, flops / best / 1e9);
  if (isfinite(faiss))
    printf("%.3f s | %.2fx |\n", faiss, faiss / best);
  else
    printf("n/a | n/a |\n");
  fflush(stdout);
}

int main(int argc, char **argv)
{
  int threads = 0;
  gboolean quick = FALSE;
  GOptionEntry entries[] = {
      {"threads", 't', 0, G_OPTION_ARG_INT, &threads, "Threads for knnwb (0 = all cores)", "N"},
      {"quick", 'q', 0, G_OPTION_ARG_NONE, &quick, "Small sizes only (smoke run)", NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new("- knnwb CPU engine vs FAISS");
  g_option_context_add_main_entries(context, entries, NULL);
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error)) {
    g_printerr("%s\n", error->message);
    return 2;
  }
  igraph_set_error_handler(igraph_error_handler_ignore);
  int used = threads > 0 ? threads : (int)g_get_num_processors();
  printf("| case | threads | knnwb | GFLOP/s (n^2 d MACs) | FAISS IndexFlatIP | FAISS / knnwb |\n");
  printf("| --- | --- | --- | --- | --- | --- |\n");
  if (quick) {
    bench_case(2000, 64, 20, used);
    return 0;
  }
  bench_case(12625, 128, 20, used);
  bench_case(100000, 64, 20, used);
  return 0;
}
