/*
 * The exact kNN engine on the CUDA backend against the CPU backend: identical indices and
 * distances (bit for bit) for every metric, odd sizes, k in {1, 20, 1000, 4096}, budgets forcing
 * many tiles, and 1 or 2 GPUs (device 0 listed twice when only one exists), with every screening
 * precision (auto screens k <= 256 in FP16) on ordinary and adversarial inputs (near ties 1e-4
 * apart, huge and tiny components in one row, duplicates), and core's refine on the device (k up to
 * n - 1, query jobs, with and without it). The CPU backend is itself checked
 * against a double brute force (tests/core). Skips without a GPU.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <igraph.h>
#include <knnwb/knnwb.h>
#include <knnwb/clustering.h>
#include "base/base.h"
#include "engine/engine.h"
#include "knnwb_kernels.h"
#include "knnwb_test_matrix.h"

/* The GPU runs' screening precision (the CPU backend always screens in FP32). */
static KnnwbScreen gpu_screen = KNNWB_SCREEN_AUTO;
static size_t last_reselected;

static KnnwbNeighbors *run(const KnnwbMatrix *m, KnnwbMetric metric, size_t k, KnnwbBackend backend,
                           size_t gpu_memory, const int *devices, int n_devices)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = metric;
  options.k = k;
  options.backend = backend;
  options.n_threads = 2;
  options.gpu_memory_bytes = gpu_memory;
  options.devices = devices;
  options.n_devices = n_devices;
  if (backend == KNNWB_BACKEND_CUDA)
    options.screen = gpu_screen;
  KnnwbNeighbors *nb = NULL;
  g_autoptr(GError) error = NULL;
  gboolean ok = knnwb_knn_self(m, &options, &nb, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
  return nb;
}

static void compare(const KnnwbMatrix *m, KnnwbMetric metric, size_t k, size_t gpu_memory,
                    int n_devices)
{
  static const int twice[2] = {0, 0};
  const int *devices = NULL;
  if (n_devices == 2)
    devices = knnwb_cuda_device_count() >= 2 ? NULL : twice;
  g_autoptr(KnnwbNeighbors) cpu = run(m, metric, k, KNNWB_BACKEND_CPU, 0, NULL, 0);
  g_autoptr(KnnwbNeighbors) gpu =
      run(m, metric, k, KNNWB_BACKEND_CUDA, gpu_memory, devices, devices ? 2 : 0);
  g_assert_true(g_str_has_prefix(gpu->backend_used, "cuda"));
  if (gpu_screen != KNNWB_SCREEN_AUTO && metric != KNNWB_METRIC_MANHATTAN)
    g_assert_cmpint(gpu->screen_used, ==, gpu_screen);
  if (metric == KNNWB_METRIC_MANHATTAN)
    g_assert_cmpint(gpu->screen_used, ==, KNNWB_SCREEN_FP32);
  last_reselected = gpu->n_reselected;
  g_assert_cmpuint(cpu->n_queries, ==, gpu->n_queries);
  size_t cells = cpu->n_queries * k;
  size_t differences = 0;
  for (size_t t = 0; t < cells; t++)
    if (cpu->indices[t] != gpu->indices[t] ||
        memcmp(&cpu->distances[t], &gpu->distances[t], sizeof(double)) != 0) {
      if (differences++ < 5)
        g_printerr("%s k=%zu row %zu slot %zu: cpu %" G_GINT64_FORMAT
                   " %.17g, cuda %" G_GINT64_FORMAT " %.17g\n",
                   knnwb_metric_to_string(metric), k, t / k, t % k, cpu->indices[t],
                   cpu->distances[t], gpu->indices[t], gpu->distances[t]);
    }
  g_assert_cmpuint(differences, ==, 0);
}

#define MIB ((size_t)1 << 20)

static gboolean gpu_or_skip(void)
{
  if (knnwb_cuda_device_count() > 0)
    return TRUE;
  g_test_skip("no usable CUDA device");
  return FALSE;
}

/* A search that must show in the CUDA trace. In this test's subprocess (CUDA not started there
 * yet) it searches m on GPU 0 alone with the trace on and returns FALSE: its caller returns. The
 * parent runs that subprocess, asserts that it passed and printed pattern, and returns TRUE; FALSE
 * without a GPU (the test skipped). */
static gboolean traced_on_one_gpu(const KnnwbMatrix *m, KnnwbMetric metric, size_t k,
                                  const char *pattern)
{
  if (g_test_subprocess()) {
    g_setenv("CUDA_VISIBLE_DEVICES", "0", TRUE);
    g_setenv("KNNWB_CUDA_TRACE", "1", TRUE);
    compare(m, metric, k, 0, 1);
    return FALSE;
  }
  if (!gpu_or_skip())
    return FALSE;
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
  g_test_trap_assert_stderr(pattern);
  return TRUE;
}

static void test_every_metric(void)
{
  if (!gpu_or_skip())
    return;
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(1501, 33, 3);
  for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++) {
    compare(m, metric, 20, 0, 1);
    compare(m, metric, 1, 96 * MIB + 2 * MIB, 1);
  }
}

static void test_many_tiles_two_gpus(void)
{
  if (!gpu_or_skip())
    return;
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(2777, 61, 4);
  for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++)
    compare(m, metric, 20, 96 * MIB + 3 * MIB, 2);
  /* The paths for GPUs without peer access (sampled thresholds, lists merged on the host). */
  g_setenv("KNNWB_CUDA_NO_PEER_ACCESS", "1", TRUE);
  compare(m, KNNWB_METRIC_PEARSON, 20, 96 * MIB + 3 * MIB, 2);
  compare(m, KNNWB_METRIC_EUCLIDEAN, 7, 0, 2);
  g_unsetenv("KNNWB_CUDA_NO_PEER_ACCESS");
}

static void test_large_k(void)
{
  if (!gpu_or_skip())
    return;
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(4603, 17, 5);
  compare(m, KNNWB_METRIC_PEARSON, 1000, 0, 1);
  compare(m, KNNWB_METRIC_EUCLIDEAN, 4096, 0, 2);
  compare(m, KNNWB_METRIC_MANHATTAN, 4096, 96 * MIB + 64 * MIB, 1);
}

/* n x d rows built to stress the screen's bound: near ties (a row and its copy 1e-4 apart in one
 * component), rows whose components span 1e-6 to 1e6 (the small ones fall below half precision's
 * normal range once centred and scaled), exact duplicates, and constant offsets. */
static KnnwbMatrix *adversarial_matrix(size_t n, size_t d, guint32 seed)
{
  g_autoptr(GRand) rng = g_rand_new_with_seed(seed);
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  g_assert_nonnull(m);
  for (size_t i = 0; i < n; i++) {
    float *row = m->values + i * d;
    for (size_t j = 0; j < d; j++)
      row[j] = (float)g_rand_double_range(rng, -1, 1);
    if (i % 5 == 1) {
      memcpy(row, row - d, d * sizeof(float));
      row[i % d] += 1e-4f;
    } else if (i % 11 == 3) {
      for (size_t j = 0; j < d; j++)
        row[j] *= j % 2 ? 1e6f : 1e-6f;
    } else if (i % 13 == 7 && i >= 7) {
      memcpy(row, row - 7 * d, d * sizeof(float));
    } else if (i % 17 == 2) {
      for (size_t j = 0; j < d; j++)
        row[j] = 1000.0f + row[j] * 1e-3f; /* a large offset, small spread */
    }
    row[0] += 2.0f; /* never constant */
  }
  return m;
}

/* n x d rows on an arc (angles 0.5 .. 2 in the first two components, small noise in the others),
 * and row 0 at angle pi: from row 0, every later row is nearer than the ones before it (cosine,
 * euclidean). By default a fresh tile is filtered in column stages of doubling width against the
 * kc-th best of the columns before: row 0's third stage passes every one of its 192 columns, more
 * than a candidate buffer holds (cap = 96 at k = 20), so that row leaves the warp merge for the
 * block merge, which re-reads the line (tile_select.cu, merge_warp_kernel). With
 * KNNWB_CUDA_FRESH=kernel the fresh tile's kernel (tile_fresh.cu) meets row 0's best pairs last. */
static KnnwbMatrix *arc_matrix(size_t n, size_t d, guint32 seed)
{
  g_autoptr(GRand) rng = g_rand_new_with_seed(seed);
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  g_assert_nonnull(m);
  for (size_t i = 0; i < n; i++) {
    float *row = m->values + i * d;
    const double angle = i == 0 ? G_PI : 0.5 + 1.5 * (double)i / (double)n;
    row[0] = (float)cos(angle);
    row[1] = (float)sin(angle);
    for (size_t j = 2; j < d; j++)
      row[j] = (float)g_rand_double_range(rng, -0.01, 0.01);
  }
  return m;
}

/* n x d rows that are one row plus noise 1e-6 its size: distinct in single precision, so no
 * duplicate search joins them, but their half-precision products are equal, so that a fresh row's
 * line holds thousands of equal keys (the fresh kernel's room overflows: tile_fresh.cu). */
static KnnwbMatrix *near_copy_matrix(size_t n, size_t d, guint32 seed)
{
  g_autoptr(GRand) rng = g_rand_new_with_seed(seed);
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  g_assert_nonnull(m);
  for (size_t j = 0; j < d; j++)
    m->values[j] = (float)g_rand_double_range(rng, -1, 1);
  for (size_t i = 1; i < n; i++)
    for (size_t j = 0; j < d; j++)
      m->values[i * d + j] = m->values[j] * (1.0f + (float)g_rand_double_range(rng, -1e-6, 1e-6));
  return m;
}

/* Fresh tiles on the arc (arc_matrix), with near ties and duplicates (adversarial_matrix: equal
 * keys at a list's boundary) and with thousands of equal keys a line (near_copy_matrix), selected
 * by the one kernel and in column stages whose rows overflow a buffer, on one tile and on many
 * tiles of two GPUs, every metric, in the default (FP16 for k <= 256) and the FP32 screen. */
static void test_fresh_tile_overflow(void)
{
  if (!gpu_or_skip())
    return;
  g_autoptr(KnnwbMatrix) arc = arc_matrix(1201, 9, 31);
  g_autoptr(KnnwbMatrix) ties = adversarial_matrix(1333, 19, 37);
  g_autoptr(KnnwbMatrix) copies = near_copy_matrix(6001, 24, 41);
  static const KnnwbScreen screens[] = {KNNWB_SCREEN_AUTO, KNNWB_SCREEN_FP32};
  static const char *const ways[] = {"stages", "kernel"};
  for (size_t w = 0; w < G_N_ELEMENTS(ways); w++) {
    g_setenv("KNNWB_CUDA_FRESH", ways[w], TRUE);
    for (size_t s = 0; s < G_N_ELEMENTS(screens); s++) {
      gpu_screen = screens[s];
      for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++) {
        compare(arc, metric, 20, 0, 1);
        compare(arc, metric, 20, 96 * MIB + 3 * MIB, 2);
        compare(ties, metric, 33, 96 * MIB + 1 * MIB, 1);
      }
      compare(copies, KNNWB_METRIC_PEARSON, 20, 0, 1);
      compare(copies, KNNWB_METRIC_EUCLIDEAN, 9, 0, 2);
    }
  }
  g_unsetenv("KNNWB_CUDA_FRESH");
  gpu_screen = KNNWB_SCREEN_AUTO;
}

/* Ordinary FP16 tiles of DOT and ABS_DOT scores are fused (GEMM and filter in one kernel,
 * kernels/tile_fused_wgmma.cu or tile_fused.cu) where KNNWB_CUDA_FUSED=1 selects them, or where the
 * default's measurement chose them: every path
 * against the CPU on many tiles of one and two GPUs, with near ties and duplicates
 * (adversarial_matrix), and with ordinary tiles whose lines overflow a row's buffer (arc_matrix's
 * row 0: every later column is nearer than the ones before), which the merge takes from the fused
 * tile's kept pairs, or recomputes from the rows when the pairs did not fit.
 * KNNWB_CUDA_FUSED_AFTER=0 fuses every tile after a row's first (by default a tile's rows and
 * columns must have seen 4 tiles, which these small inputs rarely reach); rows of 8,307 x 101 (dpad
 * 104) make two K stages, the second partly past the rows. */
static void test_fused_tiles(void)
{
  if (!gpu_or_skip())
    return;
  g_autoptr(KnnwbMatrix) arc = arc_matrix(1201, 9, 41);
  g_autoptr(KnnwbMatrix) adversarial = adversarial_matrix(9001, 45, 43); /* > one 8192 tile */
  /* dpad 208 (rows padded to 8, not to the default 64): 4 K stages of 64 on the wgmma kernel's
   * ring of 3, the last one partly padding */
  g_autoptr(KnnwbMatrix) wide = knnwb_test_random_matrix(8501, 201, 44);
  g_autoptr(KnnwbMatrix) mid = knnwb_test_random_matrix(8307, 101, 45);
  g_setenv("KNNWB_CUDA_DPAD_ROUND", "8", TRUE);
  g_setenv("KNNWB_CUDA_FUSED_AFTER", "0", TRUE);
  /* the fused tile on the kernel the device runs (wgmma on compute capability 9.0), on the
   * mma.sync kernel, and not fused; with the room its buffer gives the tile's passing pairs (a
   * line that overflows its row's buffer is then taken from them), with room for one or 100 pairs
   * a tile (the lines of the others lose some: their merge recomputes them from the rows), and
   * fused tiles that wait for the previous tile's merge */
  static const char *const fused[][4] = {{"1", "auto", "", "1"},
                                         {"1", "auto", "1", "1"},
                                         {"1", "sync", "100", "1"},
                                         {"1", "auto", "", "0"},
                                         {"0", "auto", "", "1"}};
  for (size_t f = 0; f < G_N_ELEMENTS(fused); f++) {
    g_setenv("KNNWB_CUDA_FUSED", fused[f][0], TRUE);
    g_setenv("KNNWB_CUDA_FUSED_MMA", fused[f][1], TRUE);
    g_setenv("KNNWB_CUDA_FUSED_ROOM", fused[f][2], TRUE);
    g_setenv("KNNWB_CUDA_FUSED_OVERLAP", fused[f][3], TRUE);
    for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++) {
      compare(arc, metric, 20, 96 * MIB + 3 * MIB, 1);
      compare(arc, metric, 20, 96 * MIB + 3 * MIB, 2);
      /* the adversarial rows re-select more rows than the small budget holds (test_screens) */
      compare(adversarial, metric, 20, 0, 2);
      compare(adversarial, metric, 1, 0, 1);
    }
    compare(wide, KNNWB_METRIC_PEARSON, 20, 0, 1);
    compare(wide, KNNWB_METRIC_COSINE, 7, 0, 2);
    compare(mid, KNNWB_METRIC_PEARSON, 20, 0, 1);
    compare(mid, KNNWB_METRIC_COSINE, 30, 0, 2);
    /* tiles of 1,024 (9 blocks) with the default rule's kind: tiles whose rows or columns saw
     * fewer than 3 tiles filtered, the others fused, in one run */
    g_setenv("KNNWB_CUDA_MAX_TILE", "1024", TRUE);
    g_setenv("KNNWB_CUDA_FUSED_AFTER", "3", TRUE);
    compare(mid, KNNWB_METRIC_PEARSON, 20, 0, 1);
    compare(mid, KNNWB_METRIC_ABS_PEARSON, 9, 0, 2);
    g_setenv("KNNWB_CUDA_FUSED_AFTER", "0", TRUE);
    g_unsetenv("KNNWB_CUDA_MAX_TILE");
  }
  /* the default: each worker measures fused and filtered tiles in windows (both kinds in turn),
   * then keeps the faster; windows of 4 tiles (the first 8 tiles that may be fused filtered, then
   * 16 measured, the next 16 tiles on after a close decision, 112 or 240 on after a clear one),
   * and tiles of 128 give 3,001 rows 300 tiles */
  g_autoptr(KnnwbMatrix) many = knnwb_test_random_matrix(3001, 45, 46);
  g_setenv("KNNWB_CUDA_FUSED", "", TRUE);
  g_setenv("KNNWB_CUDA_FUSED_PROBE", "4", TRUE);
  g_setenv("KNNWB_CUDA_FUSED_ROOM", "", TRUE);
  g_setenv("KNNWB_CUDA_FUSED_OVERLAP", "1", TRUE);
  g_setenv("KNNWB_CUDA_MAX_TILE", "128", TRUE);
  compare(many, KNNWB_METRIC_PEARSON, 20, 0, 1);
  compare(many, KNNWB_METRIC_COSINE, 5, 0, 2);
  g_unsetenv("KNNWB_CUDA_MAX_TILE");
  g_unsetenv("KNNWB_CUDA_FUSED_PROBE");
  g_unsetenv("KNNWB_CUDA_FUSED");
  g_unsetenv("KNNWB_CUDA_FUSED_MMA");
  g_unsetenv("KNNWB_CUDA_FUSED_ROOM");
  g_unsetenv("KNNWB_CUDA_FUSED_OVERLAP");
  g_unsetenv("KNNWB_CUDA_DPAD_ROUND");
  g_unsetenv("KNNWB_CUDA_FUSED_AFTER");
}

/* The FP16 tiles' GEMM on cuBLASLt's fastest algorithm and on cublasGemmEx, each against the
 * CPU backend: tiles of 128, so that 1,201 rows make the 64 full tiles the choice needs, and
 * partial tiles beside them (which stay on cublasGemmEx); one GPU and two. */
static void test_lt_gemm(void)
{
  if (!gpu_or_skip())
    return;
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(1201, 45, 12);
  g_setenv("KNNWB_CUDA_MAX_TILE", "128", TRUE);
  gpu_screen = KNNWB_SCREEN_FP16;
  static const char *const gemms[] = {"lt", "ex", "auto"};
  for (size_t g = 0; g < G_N_ELEMENTS(gemms); g++) {
    g_setenv("KNNWB_CUDA_GEMM", gemms[g], TRUE);
    for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++)
      if (metric != KNNWB_METRIC_MANHATTAN)
        compare(m, metric, 20, 0, 1);
    compare(m, KNNWB_METRIC_PEARSON, 7, 0, 2);
  }
  gpu_screen = KNNWB_SCREEN_AUTO;
  g_unsetenv("KNNWB_CUDA_GEMM");
  g_unsetenv("KNNWB_CUDA_MAX_TILE");
}

/* Every explicit screening precision against the CPU backend, on every metric: ordinary data,
 * adversarial data, k = 1, a budget forcing streamed blocks, and k = 4096 under FP16. */
static void test_screens(void)
{
  if (!gpu_or_skip())
    return;
  static const KnnwbScreen screens[] = {KNNWB_SCREEN_FP32, KNNWB_SCREEN_TF32, KNNWB_SCREEN_FP16};
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(1201, 45, 8);
  g_autoptr(KnnwbMatrix) hard = adversarial_matrix(1303, 37, 9);
  for (size_t s = 0; s < G_N_ELEMENTS(screens); s++) {
    gpu_screen = screens[s];
    for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++) {
      compare(m, metric, 20, 0, 1);
      compare(hard, metric, 20, 0, 1);
      if (metric == KNNWB_METRIC_PEARSON)
        g_test_message("%s: %zu row(s) of the adversarial set re-selected",
                       knnwb_screen_to_string(screens[s]), last_reselected);
      compare(hard, metric, 1, 0, 1);
    }
    /* streamed blocks (the FP16 blocks converted on the copy stream) and two GPUs (the
     * adversarial euclidean rows re-select up to every row: their norms span 1e-6 to 1e6, and the
     * bound scales with the largest, so they get the default budget) */
    compare(m, KNNWB_METRIC_PEARSON, 9, 96 * MIB + 2 * MIB, 1);
    compare(m, KNNWB_METRIC_EUCLIDEAN, 20, 96 * MIB + 3 * MIB, 2);
    compare(hard, KNNWB_METRIC_EUCLIDEAN, 20, 0, 2);
  }
  gpu_screen = KNNWB_SCREEN_FP16;
  g_autoptr(KnnwbMatrix) big = knnwb_test_random_matrix(4603, 17, 5);
  compare(big, KNNWB_METRIC_PEARSON, 4096, 0, 1);
  gpu_screen = KNNWB_SCREEN_AUTO;
}

/* The lists of query among reference on one backend: knnwb_knn_query, or with within
 * knnwb_knn_query_within (each row within its bound). */
static KnnwbNeighbors *query_within(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                                    KnnwbMetric metric, size_t k, const double *within,
                                    KnnwbBackend backend, size_t gpu_memory)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = metric;
  options.k = k;
  options.backend = backend;
  options.n_threads = 2;
  options.gpu_memory_bytes = gpu_memory;
  g_autoptr(GError) error = NULL;
  KnnwbNeighbors *nb = NULL;
  const gboolean ok = within != NULL
                          ? knnwb_knn_query_within(query, reference, &options, within, &nb, &error)
                          : knnwb_knn_query(query, reference, &options, &nb, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
  return nb;
}

/* A query job (query rows against other reference rows: the panel schedule) on both backends. */
static void compare_query(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                          KnnwbMetric metric, size_t k, size_t gpu_memory)
{
  KnnwbNeighbors *nb[2] = {
      query_within(query, reference, metric, k, NULL, KNNWB_BACKEND_CPU, 0),
      query_within(query, reference, metric, k, NULL, KNNWB_BACKEND_CUDA, gpu_memory)};
  g_assert_true(g_str_has_prefix(nb[1]->backend_used, "cuda"));
  g_assert_cmpmem(nb[0]->indices, query->n_rows * k * sizeof(int64_t), nb[1]->indices,
                  query->n_rows * k * sizeof(int64_t));
  g_assert_cmpmem(nb[0]->distances, query->n_rows * k * sizeof(double), nb[1]->distances,
                  query->n_rows * k * sizeof(double));
  knnwb_neighbors_free(nb[0]);
  knnwb_neighbors_free(nb[1]);
}

/* Core's refine on the device (lists sorted by exact distance and cut to k before they come back,
 * lists_refine.cu), which GPU runs with room for the exact rows take: k from 1 up to the number of
 * rows (every row a candidate), odd sizes, sort capacities just past a power of two,
 * duplicates and near ties, query jobs (panels), streamed blocks, two GPUs with and without peer
 * access, and the host refine it replaces (KNNWB_CUDA_HOST_REFINE=1) on the same inputs. */
static void test_refine_on_device(void)
{
  if (!gpu_or_skip())
    return;
  g_autoptr(KnnwbMatrix) small = knnwb_test_random_matrix(301, 7, 21);
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(1777, 13, 22);
  g_autoptr(KnnwbMatrix) hard = adversarial_matrix(1303, 37, 23);
  g_autoptr(KnnwbMatrix) query = knnwb_test_random_matrix(777, 13, 24);
  for (int host = 0; host < 2; host++) {
    if (host)
      g_setenv("KNNWB_CUDA_HOST_REFINE", "1", TRUE);
    compare(small, KNNWB_METRIC_PEARSON, 300, 0, 1); /* k = n - 1: every row a candidate */
    compare(small, KNNWB_METRIC_EUCLIDEAN, 299, 0, 1);
    compare(m, KNNWB_METRIC_PEARSON, 1500, 0, 1);
    compare(m, KNNWB_METRIC_ABS_PEARSON, 65, 0, 1); /* FP16, kc = 81: a sort of 128 */
    compare(hard, KNNWB_METRIC_PEARSON, 1000, 0, 1);
    compare(hard, KNNWB_METRIC_EUCLIDEAN, 1000, 0, 1);
    compare(hard, KNNWB_METRIC_PEARSON, 1, 0, 1); /* small k: sorts of 8 to 64 */
    compare(hard, KNNWB_METRIC_EUCLIDEAN, 2, 0, 1);
    compare(m, KNNWB_METRIC_COSINE, 20, 0, 1);
    compare_query(query, m, KNNWB_METRIC_PEARSON, 1500, 0);
    compare_query(query, m, KNNWB_METRIC_EUCLIDEAN, 3, 0);
    compare_query(query, m, KNNWB_METRIC_COSINE, 700, 96 * MIB + 8 * MIB);
  }
  g_unsetenv("KNNWB_CUDA_HOST_REFINE");
  compare(m, KNNWB_METRIC_MANHATTAN, 1001, 96 * MIB + 16 * MIB, 1);
  compare(m, KNNWB_METRIC_PEARSON, 1000, 0, 2);
  g_setenv("KNNWB_CUDA_NO_PEER_ACCESS", "1", TRUE);
  compare(m, KNNWB_METRIC_PEARSON, 1000, 0, 2); /* kc lists merged and refined on the host */
  g_unsetenv("KNNWB_CUDA_NO_PEER_ACCESS");
}

/* Rows visited in core's order (KNNWB_ROW_ORDER=1 at any size: core/engine/row_order.c, the
 * backend's kernels/row_order.cu): the CPU's bytes for every metric, on one GPU and two (with and
 * without peer access), many small tiles, duplicates and near ties (the device's sort by distance
 * and index sees the rows' own numbers), the host refine, and a small budget (rows that do not
 * stay on the device are visited in the given order). */
static void test_row_order(void)
{
  if (!gpu_or_skip())
    return;
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(2777, 19, 31);
  g_autoptr(KnnwbMatrix) hard = adversarial_matrix(1303, 37, 32);
  g_setenv("KNNWB_ROW_ORDER", "1", TRUE);
  g_setenv("KNNWB_CUDA_MAX_TILE", "256", TRUE);
  for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++) {
    compare(m, metric, 20, 0, 1);
    compare(hard, metric, 7, 0, 1);
  }
  compare(m, KNNWB_METRIC_PEARSON, 20, 0, 2);
  compare(hard, KNNWB_METRIC_EUCLIDEAN, 30, 0, 2);
  g_setenv("KNNWB_CUDA_NO_PEER_ACCESS", "1", TRUE);
  compare(m, KNNWB_METRIC_COSINE, 20, 0, 2); /* kc lists merged and refined on the host */
  g_unsetenv("KNNWB_CUDA_NO_PEER_ACCESS");
  g_setenv("KNNWB_CUDA_HOST_REFINE", "1", TRUE);
  compare(hard, KNNWB_METRIC_PEARSON, 25, 0, 1);
  compare(m, KNNWB_METRIC_EUCLIDEAN, 5, 0, 1);
  g_unsetenv("KNNWB_CUDA_HOST_REFINE");
  compare(m, KNNWB_METRIC_PEARSON, 20, 96 * MIB + 3 * MIB, 1); /* a small budget */
  g_unsetenv("KNNWB_CUDA_MAX_TILE");
  g_unsetenv("KNNWB_ROW_ORDER");
}

/* Rows uploaded to the GPU while core samples them (kernels/rows_start.cu, KNNWB_CUDA_ROWS_START=1
 * at any size): the CPU's bytes for every metric (manhattan screens in FP32: none uploaded), with
 * the rows grouped, duplicates (begun before the duplicate search, then stopped and dropped: the
 * distinct rows are searched), wide rows in several chunks over 8, 3 and 1 lane(s), two GPUs and
 * a budget (none uploaded), rows begun for other rows (freed by the next select or start, never
 * taken) and dropped without a search (the GPU's memory back). In a subprocess with the trace: a
 * search of one GPU takes the rows. */
static void test_rows_ahead(void)
{
  /* (41 columns: none of its rows of exact ties is a copy of another, which would send the search
   * to the distinct rows, whose rows are not uploaded ahead) */
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(2777, 41, 41);
  g_setenv("KNNWB_CUDA_ROWS_START", "1", TRUE);
  if (!traced_on_one_gpu(m, KNNWB_METRIC_PEARSON, 20, "*rows uploaded ahead taken*"))
    return;
  g_autoptr(KnnwbMatrix) hard = adversarial_matrix(1303, 37, 42);
  g_autoptr(KnnwbMatrix) other = knnwb_test_random_matrix(3001, 19, 43);
  for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++)
    compare(m, metric, 20, 0, 1);
  compare(hard, KNNWB_METRIC_EUCLIDEAN, 7, 0, 1);
  g_setenv("KNNWB_ROW_ORDER", "1", TRUE);
  compare(m, KNNWB_METRIC_COSINE, 20, 0, 1);
  g_unsetenv("KNNWB_ROW_ORDER");
  compare(m, KNNWB_METRIC_PEARSON, 20, 0, 2);
  compare(m, KNNWB_METRIC_PEARSON, 20, 96 * MIB + 3 * MIB, 1);
  /* wide rows: chunks of 256 rows, ten of them dealt over 8, 3 and 1 lane(s), the last short */
  g_autoptr(KnnwbMatrix) wide = knnwb_test_random_matrix(2311, 8191, 44);
  const char *lanes[] = {NULL, "3", "1"};
  for (size_t i = 0; i < G_N_ELEMENTS(lanes); i++) {
    if (lanes[i] != NULL)
      g_setenv("KNNWB_CUDA_UPLOAD_LANES", lanes[i], TRUE);
    compare(wide, KNNWB_METRIC_PEARSON, 10, 0, 1);
    g_unsetenv("KNNWB_CUDA_UPLOAD_LANES");
  }
  const size_t slack = 64 * MIB, free_before = knnwb_cuda_free_bytes(0);
  knnwb_cuda_rows_start(0, other->values, other->n_rows, other->n_cols, 64.0);
  compare(m, KNNWB_METRIC_EUCLIDEAN, 9, 96 * MIB + 3 * MIB, 1); /* frees the other rows */
  knnwb_cuda_rows_start(0, other->values, other->n_rows, other->n_cols, 64.0);
  compare(m, KNNWB_METRIC_COSINE, 9, 0, 1); /* the other rows dropped, these taken */
  knnwb_cuda_rows_start(0, other->values, other->n_rows, other->n_cols, 64.0);
  knnwb_cuda_rows_start_drop();
  knnwb_cuda_rows_start_drop(); /* nothing left to drop */
  g_assert_cmpuint(knnwb_cuda_free_bytes(0) + slack, >=, free_before);
  g_unsetenv("KNNWB_CUDA_ROWS_START");
}

/* The rows' upload ahead dealt over several lanes (rows_start.cu, upload_lanes): in a subprocess
 * with the trace, wide rows in ten chunks over three staged lanes whose rows the search then took
 * (a lane that failed fails the upload, which leaves the rows to the select: the same lists, but
 * no "taken"). */
static void test_rows_ahead_lanes(void)
{
  g_autoptr(KnnwbMatrix) wide = knnwb_test_random_matrix(2311, 8191, 44);
  g_setenv("KNNWB_CUDA_ROWS_START", "1", TRUE);
  g_setenv("KNNWB_CUDA_UPLOAD_LANES", "3", TRUE);
  (void)traced_on_one_gpu(wide, KNNWB_METRIC_PEARSON, 10,
                          "*rows uploaded ahead to GPU 0 in * s, 3 lane(s) (after *"
                          "rows uploaded ahead taken*");
  g_unsetenv("KNNWB_CUDA_UPLOAD_LANES");
  g_unsetenv("KNNWB_CUDA_ROWS_START");
}

/* The next column's diagonal tile computed beside this column's tiles (schedule_ahead.cu): tiles
 * of 128 rows (23 columns), cuBLASLt's tile GEMM (which it needs), every metric, with the rows
 * grouped, with the fused tiles' measurements in windows of 2 tiles (so that measurements begin
 * while a diagonal is ahead), fused tiles always and never, and KNNWB_CUDA_DIAGONAL_AHEAD=0: the
 * CPU's bytes each time; in a subprocess with the trace, a search of one GPU takes them. */
static void test_diagonal_ahead(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(3001, 41, 45);
  g_setenv("KNNWB_CUDA_MAX_TILE", "128", TRUE);
  g_setenv("KNNWB_CUDA_GEMM", "lt", TRUE);
  if (!traced_on_one_gpu(m, KNNWB_METRIC_PEARSON, 20,
                         "*diagonal tiles a column ahead, on a stream of their own*")) {
    g_unsetenv("KNNWB_CUDA_GEMM");
    g_unsetenv("KNNWB_CUDA_MAX_TILE");
    return;
  }
  for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++)
    compare(m, metric, 20, 0, 1);
  g_setenv("KNNWB_ROW_ORDER", "1", TRUE);
  compare(m, KNNWB_METRIC_COSINE, 13, 0, 1);
  g_unsetenv("KNNWB_ROW_ORDER");
  g_setenv("KNNWB_CUDA_FUSED_PROBE", "2", TRUE);
  compare(m, KNNWB_METRIC_PEARSON, 20, 0, 1);
  g_unsetenv("KNNWB_CUDA_FUSED_PROBE");
  for (int fused = 0; fused < 2; fused++) {
    g_setenv("KNNWB_CUDA_FUSED", fused ? "1" : "0", TRUE);
    compare(m, KNNWB_METRIC_EUCLIDEAN, 20, 0, 1);
  }
  g_unsetenv("KNNWB_CUDA_FUSED");
  g_setenv("KNNWB_CUDA_DIAGONAL_AHEAD", "0", TRUE);
  compare(m, KNNWB_METRIC_PEARSON, 20, 0, 1);
  g_unsetenv("KNNWB_CUDA_DIAGONAL_AHEAD");
  g_unsetenv("KNNWB_CUDA_GEMM");
  g_unsetenv("KNNWB_CUDA_MAX_TILE");
}

/* A query job whose panels start from the rows' bounds (schedule_panels.cu): the CPU's bytes for
 * every metric, over several panels, with the rows resident and streamed, against references with
 * duplicate rows (searched as distinct rows); rows without a bound (+inf, NaN) get full lists, and
 * some rows find fewer than k within theirs. A bound too tight on either side loses a pair
 * within, which the other keeps. */
static void test_query_within(void)
{
  if (!gpu_or_skip())
    return;
  const size_t k = 10;
  g_autoptr(KnnwbMatrix) query = knnwb_test_random_matrix(20011, 13, 31);
  g_autoptr(KnnwbMatrix) other = knnwb_test_random_matrix(1500, 13, 32);
  g_autoptr(KnnwbMatrix) reference = knnwb_test_random_matrix(3001, 13, 33);
  double *within = g_new(double, query->n_rows);
  for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++) {
    g_autoptr(KnnwbNeighbors) near =
        query_within(query, other, metric, k, NULL, KNNWB_BACKEND_CPU, 0);
    for (size_t i = 0; i < query->n_rows; i++)
      within[i] = i % 101 == 7 ? INFINITY : i % 103 == 9 ? NAN : near->distances[i * k + k - 1];
    g_autoptr(KnnwbNeighbors) cpu =
        query_within(query, reference, metric, k, within, KNNWB_BACKEND_CPU, 0);
    size_t short_rows = 0;
    for (size_t i = 0; i < query->n_rows; i++)
      short_rows += cpu->n_found[i] < (int32_t)k;
    g_assert_cmpuint(short_rows, >, query->n_rows / 50);
    for (int streamed = 0; streamed < 2; streamed++) {
      g_autoptr(KnnwbNeighbors) gpu =
          query_within(query, reference, metric, k, within, KNNWB_BACKEND_CUDA,
                       streamed ? 96 * MIB + 8 * MIB : 0);
      g_assert_true(g_str_has_prefix(gpu->backend_used, "cuda"));
      g_assert_cmpmem(cpu->indices, query->n_rows * k * sizeof(int64_t), gpu->indices,
                      query->n_rows * k * sizeof(int64_t));
      g_assert_cmpmem(cpu->distances, query->n_rows * k * sizeof(double), gpu->distances,
                      query->n_rows * k * sizeof(double));
      g_assert_cmpmem(cpu->n_found, query->n_rows * sizeof(int32_t), gpu->n_found,
                      query->n_rows * sizeof(int32_t));
    }
  }
  g_free(within);
}

/* The exact MST's masked "nearest row in another group" search and the exact MST itself: the GPU
 * (groups masked in its filter and merge) gives exactly the CPU's answers. */
static void test_groups_and_exact_mst(void)
{
  if (!gpu_or_skip())
    return;
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_PEARSON, KNNWB_METRIC_EUCLIDEAN,
                                        KNNWB_METRIC_MANHATTAN, KNNWB_METRIC_ABS_PEARSON};
  const size_t n = 3001, d = 19;
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(n, d, 77);
  int32_t *group = g_new(int32_t, n);
  int64_t *rows = g_new(int64_t, n);
  for (size_t i = 0; i < n; i++) {
    group[i] = (int32_t)(i < 2500 ? i % 7 : i); /* 7 big groups, then singletons */
    rows[i] = (int64_t)i;
  }
  for (size_t mi = 0; mi < G_N_ELEMENTS(metrics); mi++) {
    int64_t *index[2];
    double *distance[2];
    for (int b = 0; b < 2; b++) {
      KnnwbKnnOptions options;
      knnwb_knn_options_init(&options);
      options.metric = metrics[mi];
      options.backend = b ? KNNWB_BACKEND_CUDA : KNNWB_BACKEND_CPU;
      options.gpu_memory_bytes = (size_t)512 << 20;
      g_autoptr(GError) error = NULL;
      g_autoptr(KnnwbOutsideSearch) search = knnwb_outside_search_new(m, &options, &error);
      g_assert_no_error(error);
      index[b] = g_new(int64_t, n);
      distance[b] = g_new(double, n);
      gboolean ok = knnwb_outside_search_run(search, group, rows, n, index[b], distance[b], &error);
      g_assert_no_error(error);
      g_assert_true(ok);
    }
    g_assert_cmpmem(index[0], n * sizeof(int64_t), index[1], n * sizeof(int64_t));
    g_assert_cmpmem(distance[0], n * sizeof(double), distance[1], n * sizeof(double));
    for (int b = 0; b < 2; b++) {
      g_free(index[b]);
      g_free(distance[b]);
    }

    double total[2];
    for (int b = 0; b < 2; b++) {
      KnnwbMstOptions options;
      knnwb_clustering_mst_options_init(&options);
      options.metric = metrics[mi];
      options.k = 4;
      options.backend = b ? KNNWB_BACKEND_CUDA : KNNWB_BACKEND_CPU;
      igraph_t tree;
      igraph_vector_t weights;
      igraph_vector_init(&weights, 0);
      g_autoptr(GError) error = NULL;
      gboolean ok = knnwb_clustering_mst_points(m, &options, &tree, &weights, &error);
      g_assert_no_error(error);
      g_assert_true(ok);
      g_assert_cmpint(igraph_ecount(&tree), ==, (igraph_integer_t)n - 1);
      total[b] = igraph_vector_sum(&weights);
      igraph_destroy(&tree);
      igraph_vector_destroy(&weights);
    }
    g_assert_cmpfloat(total[0], ==, total[1]);
  }
  g_free(group);
  g_free(rows);
}

/* Searches inside a keep scope (knnwb_cuda_keep_begin: the partitioned run's sub-searches) reuse
 * the memory and handles of the ones before, whose bytes are still in it: the lists stay those of
 * the CPU backend, sizes shrinking and growing, every metric; what the scope keeps counts as free
 * memory, and closing it frees it (GPU 0). */
static void test_kept_memory(void)
{
  if (!gpu_or_skip())
    return;
  const size_t slack = 768 * MIB; /* cuBLAS's and the context's own growth */
  const size_t free_before = knnwb_cuda_free_bytes(0);
  g_autoptr(KnnwbMatrix) large = knnwb_test_random_matrix(20011, 64, 5);
  g_autoptr(KnnwbMatrix) smaller = knnwb_test_random_matrix(17003, 64, 6);
  g_autoptr(KnnwbMatrix) small = knnwb_test_random_matrix(1501, 33, 7);
  knnwb_cuda_keep_begin();
  knnwb_cuda_keep_begin(); /* scopes nest */
  compare(large, KNNWB_METRIC_EUCLIDEAN, 20, 0, 1);
  compare(smaller, KNNWB_METRIC_PEARSON, 20, 0, 1);
  compare(large, KNNWB_METRIC_COSINE, 7, 0, 1);
  for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++)
    compare(small, metric, 20, 0, 1);
  compare(small, KNNWB_METRIC_EUCLIDEAN, 1, 96 * MIB + 2 * MIB, 1); /* many tiles */
  knnwb_cuda_keep_end();
  compare(large, KNNWB_METRIC_EUCLIDEAN, 30, 0, 1);
  /* The kept blocks (two tile buffers of 1 GiB among them) count as free. */
  g_assert_cmpuint(knnwb_cuda_free_bytes(0) + slack, >=, free_before);
  knnwb_cuda_keep_end();
  g_assert_cmpuint(knnwb_cuda_free_bytes(0) + slack, >=, free_before);
  knnwb_cuda_keep_end(); /* an end without a scope is ignored */
  compare(small, KNNWB_METRIC_EUCLIDEAN, 5, 0, 1);
}

/* The oracle of a two-sided job's side: row i of `rows` (from first) against every valid row of
 * `of` (from of_first, count of them), its k best by (exact distance, index). */
static void cross_oracle(const KnnwbPrepared *p, size_t first, size_t i, size_t of_first,
                         size_t count, size_t k, int64_t *index, double *distance)
{
  KnnwbNeighbour *all = g_new(KnnwbNeighbour, count);
  size_t valid = 0;
  for (size_t j = 0; j < count; j++)
    if (p->invalid == NULL || !p->invalid[of_first + j])
      all[valid++] =
          (KnnwbNeighbour){knnwb_prepared_distance(p, first + i, p, of_first + j), (int64_t)j};
  qsort(all, valid, sizeof *all, knnwb_neighbour_compare);
  for (size_t t = 0; t < k; t++) {
    index[t] = t < valid ? all[t].index : -1;
    distance[t] = t < valid ? all[t].distance : INFINITY;
  }
  g_free(all);
}

/* A row's refined list where the job may have left pairs out (a bound that nothing passes: the
 * backend may honour it or not): every entry one of the oracle's pairs with its exact distance, in
 * (distance, index) order, none twice, -1 and INFINITY after the valid ones. */
static void check_subset(const KnnwbPrepared *p, size_t first, size_t i, size_t of_first,
                         size_t count, size_t k, const int64_t *index, const double *distance)
{
  size_t t = 0;
  for (; t < k && index[t] >= 0; t++) {
    g_assert_cmpint(index[t], <, (int64_t)count);
    g_assert_false(p->invalid && p->invalid[of_first + (size_t)index[t]]);
    const double want = knnwb_prepared_distance(p, first + i, p, of_first + (size_t)index[t]);
    g_assert_cmpmem(&distance[t], sizeof(double), &want, sizeof want);
    if (t > 0)
      g_assert_true(distance[t - 1] < distance[t] ||
                    (distance[t - 1] == distance[t] && index[t - 1] < index[t]));
  }
  for (; t < k; t++) {
    g_assert_cmpint(index[t], ==, -1);
    g_assert_true(isinf(distance[t]));
  }
}

/* One side's lists against the oracle: rows whose bound blocked every pair (blocked[i]) as
 * check_subset, every other valid row bit for bit the oracle's k best. */
static void check_side(const KnnwbPrepared *p, size_t first, size_t rows, size_t of_first,
                       size_t count, size_t k, const gboolean *blocked, const int64_t *index,
                       const double *distance)
{
  int64_t *want_index = g_new(int64_t, k);
  double *want_distance = g_new(double, k);
  for (size_t i = 0; i < rows; i++) {
    if (p->invalid && p->invalid[first + i])
      continue;
    if (blocked[i]) {
      check_subset(p, first, i, of_first, count, k, index + i * k, distance + i * k);
      continue;
    }
    cross_oracle(p, first, i, of_first, count, k, want_index, want_distance);
    g_assert_cmpmem(index + i * k, k * sizeof(int64_t), want_index, k * sizeof(int64_t));
    g_assert_cmpmem(distance + i * k, k * sizeof(double), want_distance, k * sizeof(double));
  }
  g_free(want_index);
  g_free(want_distance);
}

/* How a two-sided job is run: its tiles (KNNWB_CUDA_MAX_TILE, NULL: the default), fused tiles
 * (KNNWB_CUDA_FUSED with KNNWB_CUDA_FUSED_AFTER=0, NULL: the default), rows of both sides whose
 * bound nothing passes (-FLT_MAX; the others FLT_MAX, finite), declined (KNNWB_CUDA_CROSS=0), a
 * small GPU memory budget (0: the default), under which the backend may run both sides or
 * decline for want of room: either way what it returns must be right; and handed: the refined
 * lists handed to out_refined_take (which puts them in the arrays the job would fill and counts
 * each row), not written into the job's arrays; host_rows (KNNWB_CUDA_TEST_HOST_ROWS, NULL: none):
 * the host refuses the buffers of a refined chunk of more rows than that, so the chunks shrink to
 * it after the tiles, when rows may have been handed over already; derived: the rows given as a
 * split run's packed blocks give them, derived from the exact rows (KnnwbSelectJob.rows_fill;
 * manhattan, which is never derived, as given). */
typedef struct {
  const char *max_tile;
  const char *fused;
  gboolean blocked;
  gboolean declined;
  size_t memory;
  gboolean handed;
  const char *host_rows;
  gboolean derived;
} TwoSidedForm;

/* What out_refined_take received: each side's arrays (as the job's), and how often each row came
 * (calls for disjoint rows may run at once). */
typedef struct {
  size_t k, rows[2];
  int64_t *index[2];
  double *distance[2];
  float *worst[2];
  int32_t *valid[2];
  gint *seen[2];
} TwoSidedHanded;

static void two_sided_take(void *data, int side, size_t first, size_t count, const int64_t *index,
                           const double *distance, const float *worst, const int32_t *valid)
{
  TwoSidedHanded *h = data;
  g_assert_true(side == 0 || side == 1);
  g_assert_cmpuint(first + count, <=, h->rows[side]);
  memcpy(h->index[side] + first * h->k, index, count * h->k * sizeof(int64_t));
  memcpy(h->distance[side] + first * h->k, distance, count * h->k * sizeof(double));
  memcpy(h->worst[side] + first, worst, count * sizeof(float));
  memcpy(h->valid[side] + first, valid, count * sizeof(int32_t));
  for (size_t i = 0; i < count; i++)
    g_atomic_int_inc(&h->seen[side][first + i]);
}

/* Every row of a side came exactly once. */
static void two_sided_seen_once(const TwoSidedHanded *h, int side)
{
  for (size_t i = 0; i < h->rows[side]; i++)
    g_assert_cmpint(h->seen[side][i], ==, 1);
}

/* Whether two_sided_check's jobs run on every visible GPU instead of GPU 0 alone: the backend
 * runs both sides only on one GPU (a rank's own, as ranks of a host take them) and declines b's
 * on several. */
static gboolean two_sided_every_gpu;

/* Sides a = rows [0, na) and b = [na, n) of p as one job, kc = na (every pair a candidate), both
 * sides' k best checked (check_side); b's only where the job took it. Returns 2 where the job ran
 * both sides, 1 where it declined b's, 0 where a budget (form->memory) left it no room at all. */
static int two_sided_check(const KnnwbPrepared *p, size_t na, size_t nb, size_t k,
                           const TwoSidedForm *form)
{
  static const int gpu0[] = {0};
  const gboolean one_gpu = !two_sided_every_gpu || knnwb_cuda_device_count() == 1;
  const size_t d = p->d, kc = na;
  if (form->max_tile)
    g_setenv("KNNWB_CUDA_MAX_TILE", form->max_tile, TRUE);
  if (form->fused) {
    g_setenv("KNNWB_CUDA_FUSED", form->fused, TRUE);
    g_setenv("KNNWB_CUDA_FUSED_AFTER", "0", TRUE);
  }
  if (form->declined)
    g_setenv("KNNWB_CUDA_CROSS", "0", TRUE);
  if (form->host_rows)
    g_setenv("KNNWB_CUDA_TEST_HOST_ROWS", form->host_rows, TRUE);
  int64_t *index = g_new(int64_t, na * kc), *a_index = g_new(int64_t, na * k),
          *b_index = g_new(int64_t, nb * k);
  float *score = g_new(float, na *kc), *a_worst = g_new(float, na), *b_worst = g_new(float, nb),
        *a_bounds = g_new(float, na), *b_bounds = g_new(float, nb);
  double *distance = g_new(double, na *kc), *a_distance = g_new(double, na *k),
         *b_distance = g_new(double, nb *k);
  int32_t *a_valid = g_new(int32_t, na), *b_valid = g_new(int32_t, nb);
  gboolean *a_blocked = g_new0(gboolean, na), *b_blocked = g_new0(gboolean, nb);
  size_t valid_a = 0;
  for (size_t i = 0; i < na; i++) {
    a_blocked[i] = form->blocked && i % 5 == 3;
    a_bounds[i] = !form->blocked ? INFINITY : a_blocked[i] ? -FLT_MAX : FLT_MAX;
    valid_a += !(p->invalid && p->invalid[i]);
  }
  for (size_t i = 0; i < nb; i++) {
    b_blocked[i] = form->blocked && i % 7 == 2;
    b_bounds[i] = !form->blocked ? INFINITY : b_blocked[i] ? -FLT_MAX : FLT_MAX;
  }
  int refined = 0, other_refined = 0, filled = 0;
  KnnwbSelectJob job = {
      .query = p->scored,
      .n_query = na,
      .reference = p->scored + na * d,
      .n_reference = nb,
      .reference_sqnorms = p->sqnorms ? p->sqnorms + na : NULL,
      .reference_invalid = p->invalid ? p->invalid + na : NULL,
      .dim = d,
      .score_kind = knnwb_metric_score_kind(p->metric),
      .screen = knnwb_screen_kernel_precision(p->screen),
      .screen_row_norm = p->screen_row_norm,
      .screen_half_scores = knnwb_screen_half_scores(p->screen),
      .n_threads = 2,
      .memory_bytes = form->memory,
      .devices = two_sided_every_gpu ? NULL : gpu0,
      .n_devices = two_sided_every_gpu ? 0 : 1,
      .kc = kc,
      .out_index = index,
      .out_score = score,
      .exact_kind = knnwb_metric_exact_kind(p->metric),
      .exact_query = p->exact,
      .exact_reference = p->exact + na * d,
      .exact_query_mean = p->mean,
      .exact_query_squares = p->sum_squares,
      .exact_reference_mean = p->mean ? p->mean + na : NULL,
      .exact_reference_squares = p->sum_squares ? p->sum_squares + na : NULL,
      .out_distance = distance,
      .out_distance_filled = &filled,
      .out_k = k,
      .out_k_index = a_index,
      .out_k_distance = a_distance,
      .out_worst_score = a_worst,
      .out_valid = a_valid,
      .out_refined = &refined,
      .query_sqnorms = p->sqnorms,
      .query_invalid = p->invalid,
      .query_bounds = a_bounds,
      .reference_bounds = b_bounds,
      .out_reference_k_index = b_index,
      .out_reference_k_distance = b_distance,
      .out_reference_worst_score = b_worst,
      .out_reference_valid = b_valid,
      .out_reference_refined = &other_refined,
  };
  g_autofree gint *a_seen = g_new0(gint, na), *b_seen = g_new0(gint, nb);
  TwoSidedHanded handed = {k,
                           {na, nb},
                           {a_index, b_index},
                           {a_distance, b_distance},
                           {a_worst, b_worst},
                           {a_valid, b_valid},
                           {a_seen, b_seen}};
  KnnwbPrepared view = *p;
  view.scored = NULL;
  if (form->derived && knnwb_prepared_derivable(p->metric)) {
    job.query = job.reference = NULL;
    job.rows_fill = knnwb_prepared_scored_fill;
    job.query_source = job.reference_source = &view;
    job.reference_source_first = na;
  }
  if (form->handed) {
    job.out_k_index = job.out_reference_k_index = NULL;
    job.out_k_distance = job.out_reference_k_distance = NULL;
    job.out_worst_score = job.out_reference_worst_score = NULL;
    job.out_valid = job.out_reference_valid = NULL;
    job.out_refined_take = two_sided_take;
    job.out_refined_take_data = &handed;
  }
  char message[512] = "";
  const int status = knnwb_cuda_select(&job, message, sizeof message);
  g_unsetenv("KNNWB_CUDA_CROSS");
  g_unsetenv("KNNWB_CUDA_TEST_HOST_ROWS");
  g_unsetenv("KNNWB_CUDA_MAX_TILE");
  g_unsetenv("KNNWB_CUDA_FUSED");
  g_unsetenv("KNNWB_CUDA_FUSED_AFTER");
  int outcome = 0;
  if (form->memory != 0 && status == KNNWB_KERNELS_OUT_OF_MEMORY) {
    g_test_message("a two-sided job under %zu bytes: no room (%s)", form->memory, message);
  } else {
    g_assert_cmpint(status, ==, KNNWB_KERNELS_OK);
    g_assert_cmpint(refined, ==, 1);
    if (form->memory == 0)
      g_assert_cmpint(other_refined, ==, !form->declined && one_gpu);
    else
      g_test_message("a two-sided job under %zu bytes: %s", form->memory,
                     other_refined ? "both sides" : "declined");
    if (form->handed)
      two_sided_seen_once(&handed, 0);
    if (form->handed && other_refined)
      two_sided_seen_once(&handed, 1);
    check_side(p, 0, na, na, nb, k, a_blocked, a_index, a_distance);
    if (other_refined) {
      check_side(p, na, nb, 0, na, k, b_blocked, b_index, b_distance);
      /* a's rows whose own bound passed nothing are still b's candidates: bounds are one-sided */
      for (size_t i = 0; i < nb; i++)
        if (!(p->invalid && p->invalid[na + i]) && !b_blocked[i])
          g_assert_cmpint(b_valid[i], ==, (int32_t)valid_a);
    }
    outcome = other_refined ? 2 : 1;
  }
  g_free(index);
  g_free(a_index);
  g_free(b_index);
  g_free(score);
  g_free(a_worst);
  g_free(b_worst);
  g_free(a_bounds);
  g_free(b_bounds);
  g_free(distance);
  g_free(a_distance);
  g_free(b_distance);
  g_free(a_valid);
  g_free(b_valid);
  g_free(a_blocked);
  g_free(b_blocked);
  return outcome;
}

/* A two-sided job (KnnwbSelectJob.out_reference_refined, a pair of blocks of a split run) on one
 * GPU: both sides' k best, bit for bit the double oracle's when the candidates are every pair (kc
 * = the smaller side), for every metric, odd sides, a row copied across the sides and a row left
 * out on each side; in one tile and in tiles of 128 (5 x 11 tiles of both sides, no diagonal
 * one), filtered and fused; with rows on both sides whose starting bound nothing passes (their
 * lists may only lose pairs, the other side's lists none); declined (KNNWB_CUDA_CROSS=0, as where
 * the GPU cannot hold both sides), the query side still comes back right and the other is left to
 * the caller; under budgets from 3 MiB to 515 MiB, whichever the backend chose (some of them
 * leave room for the query side only); and with the lists handed over piece by piece
 * (out_refined_take: each row exactly once, the same lists), in those forms and every other
 * budget; and with the host refusing a refined chunk's buffers (chunks of 5 rows, handed; of 1,
 * written), which happens after rows were handed and must not fail the job; and with derived rows
 * (as a split run's blocks give them) in one tile, in tiles of 128, declined, and under a budget.
 */
static void test_two_sided(void)
{
  if (!gpu_or_skip())
    return;
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_PEARSON,   KNNWB_METRIC_ABS_PEARSON,
                                        KNNWB_METRIC_SPEARMAN,  KNNWB_METRIC_COSINE,
                                        KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_MANHATTAN};
  static const TwoSidedForm forms[] = {
      {NULL, NULL, FALSE, FALSE, 0, FALSE, NULL, FALSE},
      {NULL, NULL, FALSE, TRUE, 0, FALSE, NULL, FALSE},
      {"128", "0", TRUE, FALSE, 0, FALSE, NULL, FALSE},
      {"128", "1", TRUE, FALSE, 0, FALSE, NULL, FALSE},
      {"256", NULL, FALSE, FALSE, 0, FALSE, NULL, FALSE},
      {"128", "1", TRUE, TRUE, 0, FALSE, NULL, FALSE},
      {NULL, NULL, FALSE, FALSE, 0, TRUE, NULL, FALSE},
      {"128", "1", TRUE, FALSE, 0, TRUE, NULL, FALSE},
      {"128", NULL, TRUE, TRUE, 0, TRUE, NULL, FALSE},
      {NULL, NULL, FALSE, FALSE, 0, TRUE, "5", FALSE},
      {"128", "1", TRUE, FALSE, 0, FALSE, "1", FALSE},
      {NULL, NULL, FALSE, FALSE, 0, FALSE, NULL, TRUE},
      {"128", "1", TRUE, FALSE, 0, TRUE, NULL, TRUE},
      {"128", NULL, TRUE, TRUE, 0, TRUE, NULL, TRUE},
      {"128", "0", TRUE, FALSE, 150 * MIB, TRUE, NULL, TRUE},
  };
  const size_t na = 613, nb = 1301, n = na + nb, d = 19, k = 7;
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(n, d, 3);
  for (size_t j = 0; j < d; j++) { /* a copy across the sides, a constant row on each (left out) */
    m->values[(na + 5) * d + j] = m->values[2 * d + j];
    m->values[(na + 9) * d + j] = 1.0f;
    m->values[11 * d + j] = -2.0f;
  }
  for (guint mi = 0; mi < G_N_ELEMENTS(metrics); mi++) {
    KnnwbPrepared p;
    g_autoptr(GError) error = NULL;
    /* the constant rows' warning is expected, not fatal */
    GLogLevelFlags fatal = g_log_set_always_fatal(G_LOG_FATAL_MASK);
    g_assert_true(knnwb_prepared_init(&p, m, metrics[mi], TRUE, "data", 2, NULL, NULL, &error));
    g_log_set_always_fatal(fatal);
    knnwb_prepared_set_screen(
        &p, &p, metrics[mi] == KNNWB_METRIC_MANHATTAN ? KNNWB_SCREEN_FP32 : KNNWB_SCREEN_FP16);
    for (guint f = 0; f < G_N_ELEMENTS(forms); f++)
      two_sided_check(&p, na, nb, k, &forms[f]);
    /* budgets from 3 MiB up: none (below the context's 96 MiB), the query side alone (both
     * sides' rows and lists do not fit), or both sides; every one that runs must be right, the
     * largest runs both, and the steps of 2 MiB between 97 and 133 MiB find the query side
     * alone (two metrics, for the test's time) */
    int outcome = 0, declined = 0;
    const gboolean fine =
        metrics[mi] == KNNWB_METRIC_PEARSON || metrics[mi] == KNNWB_METRIC_EUCLIDEAN;
    static const size_t coarse[] = {3, 65, 129, 513};
    for (size_t t = 0, mib = 0; t < (fine ? 21 : G_N_ELEMENTS(coarse)); t++) {
      mib = !fine ? coarse[t] : t == 0 ? 3 : t < 20 ? 95 + 2 * t : 513; /* 97, 99, .. 133 */
      const size_t budget = mib * MIB;
      const TwoSidedForm small = {"128", NULL, TRUE, FALSE, budget, t % 2 == 1, NULL, FALSE};
      outcome = two_sided_check(&p, na, nb, k, &small);
      declined += outcome == 1;
    }
    g_assert_cmpint(outcome, ==, 2);
    if (fine)
      g_assert_cmpint(declined, >, 0);
    /* on every GPU of the host: both sides where there is one, the query side alone on more */
    two_sided_every_gpu = TRUE;
    two_sided_check(&p, na, nb, k, &forms[0]);
    two_sided_every_gpu = FALSE;
    knnwb_prepared_clear(&p);
  }
}

static void test_no_device_error(void)
{
  if (knnwb_cuda_device_count() > 0) {
    g_test_skip("a GPU is present");
    return;
  }
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(50, 4, 6);
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 3;
  options.backend = KNNWB_BACKEND_CUDA;
  KnnwbNeighbors *nb = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_knn_self(m, &options, &nb, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_DEVICE);
  g_assert_null(nb);
}

int main(int argc, char **argv)
{
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/cuda-knn/every-metric", test_every_metric);
  g_test_add_func("/kernels/cuda-knn/many-tiles-two-gpus", test_many_tiles_two_gpus);
  g_test_add_func("/kernels/cuda-knn/large-k", test_large_k);
  g_test_add_func("/kernels/cuda-knn/screens", test_screens);
  g_test_add_func("/kernels/cuda-knn/fresh-tile-overflow", test_fresh_tile_overflow);
  g_test_add_func("/kernels/cuda-knn/fused-tiles", test_fused_tiles);
  g_test_add_func("/kernels/cuda-knn/lt-gemm", test_lt_gemm);
  g_test_add_func("/kernels/cuda-knn/refine-on-device", test_refine_on_device);
  g_test_add_func("/kernels/cuda-knn/row-order", test_row_order);
  g_test_add_func("/kernels/cuda-knn/rows-ahead", test_rows_ahead);
  g_test_add_func("/kernels/cuda-knn/rows-ahead-lanes", test_rows_ahead_lanes);
  g_test_add_func("/kernels/cuda-knn/diagonal-ahead", test_diagonal_ahead);
  g_test_add_func("/kernels/cuda-knn/kept-memory", test_kept_memory);
  g_test_add_func("/kernels/cuda-knn/query-within", test_query_within);
  g_test_add_func("/kernels/cuda-knn/no-device-error", test_no_device_error);
  g_test_add_func("/kernels/cuda-knn/groups-and-exact-mst", test_groups_and_exact_mst);
  g_test_add_func("/kernels/cuda-knn/two-sided", test_two_sided);
  return g_test_run();
}
