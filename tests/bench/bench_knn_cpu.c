/*
 * CPU engine benchmark (not a test): exact Pearson kNN graphs of deterministic synthetic
 * expression-like matrices, timed end to end (prepare + select + exact refinement), with FAISS
 * IndexFlatIP timed on the same normalised rows in the same run when python3-faiss is installed.
 *
 * Usage: bench_knn_cpu [--threads N] [--quick] [--n N --d D --k K[,K...]] [--screen S] [--no-faiss]
 *                      [--reps R]
 * Without --n: the README's cases (12,625 x 128 and 100,000 x 64, k = 20). Each case runs knnwb
 * and FAISS alternately, three times each (--reps), and reports the best of each, so that the ratio
 * is measured under the same load (the machine is shared). GFLOP/s counts the arithmetic a
 * symmetric engine must do: n^2 d multiply-adds (= n(n-1)/2 pairs x d x 2 flops), the same count
 * for FAISS (which does 2 n^2 d) so the rates compare the work done.
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
  float *patterns = g_new(float, modules *d);
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
  return g_file_test("/usr/bin/python3", G_FILE_TEST_IS_EXECUTABLE) ? "/usr/bin/python3"
                                                                    : "python3";
}

/* Runs FAISS on the centred, normalised rows (what Pearson is an inner product of). */
static double bench_faiss(const KnnwbMatrix *m, size_t k)
{
  const size_t n = m->n_rows, d = m->n_cols;
  float *normalised = g_new(float, n *d);
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
  gboolean written =
      g_file_set_contents(path, (const char *)normalised, (gssize)(n * d * sizeof(float)), NULL);
  g_free(normalised);
  if (!written)
    return -1;
  g_autofree char *script =
      g_build_filename(KNNWB_SOURCE_DIR, "tests", "bench", "faiss_baseline.py", NULL);
  g_autofree char *n_text = g_strdup_printf("%zu", n);
  g_autofree char *d_text = g_strdup_printf("%zu", d);
  g_autofree char *k_text = g_strdup_printf("%zu", k);
  const char *argv[] = {bench_python(), script, path, n_text, d_text, k_text, NULL};
  g_autofree char *out = NULL;
  g_autofree char *err = NULL;
  int status = 0;
  double seconds = -1;
  if (g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &out, &err, &status,
                   NULL) &&
      g_spawn_check_wait_status(status, NULL)) {
    const char *line = strstr(out, "faiss_seconds ");
    if (line != NULL)
      seconds = g_ascii_strtod(line + strlen("faiss_seconds "), NULL);
  } else {
    g_printerr("  (FAISS not available: %s)\n",
               err && *err ? g_strstrip(err) : "python3-faiss missing");
  }
  g_remove(path);
  return seconds;
}

static gboolean bench_faiss_wanted = TRUE;
static int bench_reps = 3;
static KnnwbScreen bench_screen = KNNWB_SCREEN_AUTO;

static void bench_case(size_t n, size_t d, size_t k, int threads)
{
  g_autoptr(KnnwbMatrix) m = bench_matrix(n, d, (guint32)(n + d));
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = KNNWB_METRIC_PEARSON;
  options.k = k;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = threads;
  options.screen = bench_screen;
  g_autoptr(GError) error = NULL;
  /* Best of three each, like FAISS's own benchmarks, alternating so both see the same load; the
   * first run also warms the BLAS libraries. */
  double best = INFINITY, faiss = INFINITY;
  const char *screen_used = "?";
  size_t reselected = 0;
  for (int rep = 0; rep < bench_reps; rep++) {
    g_autoptr(KnnwbNeighbors) nb = NULL;
    double start = bench_now();
    if (!knnwb_knn_self(m, &options, &nb, &error)) {
      g_printerr("knnwb failed: %s\n", error->message);
      return;
    }
    best = MIN(best, bench_now() - start);
    screen_used = knnwb_screen_to_string(nb->screen_used);
    reselected = nb->n_reselected;
    double s = bench_faiss_wanted ? bench_faiss(m, k) : -1;
    if (s >= 0)
      faiss = MIN(faiss, s);
  }
  double flops =
      (double)n * (double)n * (double)d; /* n^2 d multiply-adds = n(n-1)/2 pairs x 2d flops */
  printf("| %zu x %zu, pearson, k=%zu | %d | %s (%zu re-selected) | %.3f s | %.1f | ", n, d, k,
         threads, screen_used, reselected, best, flops / best / 1e9);
  if (isfinite(faiss))
    printf("%.3f s | %.2fx |\n", faiss, faiss / best);
  else
    printf("n/a | n/a |\n");
  fflush(stdout);
}

int main(int argc, char **argv)
{
  int threads = 0, n = 0, d = 128;
  gboolean quick = FALSE, no_faiss = FALSE;
  g_autofree char *k_list = NULL, *screen = NULL;
  GOptionEntry entries[] = {
      {"threads", 't', 0, G_OPTION_ARG_INT, &threads, "Threads for knnwb (0 = all cores)", "N"},
      {"quick", 'q', 0, G_OPTION_ARG_NONE, &quick, "Small sizes only (smoke run)", NULL},
      {"n", 'n', 0, G_OPTION_ARG_INT, &n, "Rows of one case (instead of the README's)", "N"},
      {"d", 'd', 0, G_OPTION_ARG_INT, &d, "Columns of that case (128)", "D"},
      {"k", 'k', 0, G_OPTION_ARG_STRING, &k_list, "Neighbours, a comma list (20)", "K,..."},
      {"screen", 0, 0, G_OPTION_ARG_STRING, &screen, "Screening precision: auto, fp32, bf16", "S"},
      {"no-faiss", 0, 0, G_OPTION_ARG_NONE, &no_faiss, "Do not run FAISS", NULL},
      {"reps", 0, 0, G_OPTION_ARG_INT, &bench_reps, "Runs of each, the best kept (3)", "N"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new("- knnwb CPU engine vs FAISS");
  g_option_context_add_main_entries(context, entries, NULL);
  g_autoptr(GError) error = NULL;
  if (!g_option_context_parse(context, &argc, &argv, &error)) {
    g_printerr("%s\n", error->message);
    return 2;
  }
  igraph_set_error_handler(igraph_error_handler_ignore);
  bench_faiss_wanted = !no_faiss;
  if (screen != NULL && !knnwb_screen_from_string(screen, &bench_screen, &error)) {
    g_printerr("%s\n", error->message);
    return 2;
  }
  int used = threads > 0 ? threads : (int)g_get_num_processors();
  printf("| case | threads | screen | knnwb | GFLOP/s (n^2 d MACs) | FAISS IndexFlatIP | FAISS / "
         "knnwb |\n");
  printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  if (quick) {
    bench_case(2000, 64, 20, used);
    return 0;
  }
  if (n > 0) {
    g_auto(GStrv) ks = g_strsplit(k_list ? k_list : "20", ",", -1);
    for (char **k = ks; *k != NULL; k++)
      bench_case((size_t)n, (size_t)d, (size_t)g_ascii_strtoull(*k, NULL, 10), used);
    return 0;
  }
  bench_case(12625, 128, 20, used);
  bench_case(100000, 64, 20, used);
  return 0;
}
