/* The CPU backend's screening precisions (FP32, and BF16 where the CPU has it) against the double
 * oracle, on ordinary and adversarial inputs; BF16 lists must be FP32's bytes. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <knnwb/knnwb.h>
#include "cpu/cpu.h"
#include "engine/engine.h"
#include "oracle.h"
#include "knnwb_test_matrix.h"

static const KnnwbMetric all_metrics[] = {KNNWB_METRIC_PEARSON,   KNNWB_METRIC_ABS_PEARSON,
                                          KNNWB_METRIC_SPEARMAN,  KNNWB_METRIC_EUCLIDEAN,
                                          KNNWB_METRIC_MANHATTAN, KNNWB_METRIC_COSINE};

static KnnwbNeighbors *run(const KnnwbMatrix *m, const KnnwbMatrix *reference, KnnwbMetric metric,
                           size_t k, KnnwbScreen screen, size_t memory)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = metric;
  options.k = k;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = 2;
  options.memory_bytes = memory;
  options.screen = screen;
  KnnwbNeighbors *nb = NULL;
  g_autoptr(GError) error = NULL;
  gboolean ok = reference ? knnwb_knn_query(m, reference, &options, &nb, &error)
                          : knnwb_knn_self(m, &options, &nb, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
  if (metric != KNNWB_METRIC_MANHATTAN)
    g_assert_cmpint(nb->screen_used, ==, screen);
  return nb;
}

static void assert_same_bytes(const KnnwbNeighbors *a, const KnnwbNeighbors *b)
{
  g_assert_cmpuint(a->n_queries, ==, b->n_queries);
  g_assert_cmpuint(a->k, ==, b->k);
  const size_t cells = a->n_queries * a->k;
  g_assert_cmpmem(a->indices, cells * sizeof(int64_t), b->indices, cells * sizeof(int64_t));
  g_assert_cmpmem(a->distances, cells * sizeof(double), b->distances, cells * sizeof(double));
}

/* The screens to try: FP32 always, BF16 where this CPU (and build) has it. */
static size_t screens_here(KnnwbScreen screens[2])
{
  screens[0] = KNNWB_SCREEN_FP32;
  if (!knnwb_cpu_gemm_has_bf16()) {
    if (g_test_verbose())
      g_printerr("no BF16 on this CPU or build: FP32 only\n");
    return 1;
  }
  screens[1] = KNNWB_SCREEN_BF16;
  return 2;
}

/* Every metric, odd sizes (many 32 x 32 tiles under 64 KiB, edges that are no multiple of 32),
 * k = 1, 5 and n - 1, self and query jobs, each screen against the oracle and BF16 = FP32 bytes.
 * The same once with the portable scans, once with the AVX2 scans (where the CPU has AVX2; AVX-512
 * otherwise runs by default) and once with OpenBLAS's SGEMM. */
static void test_oracle(void)
{
  KnnwbScreen screens[2];
  const size_t n_screens = screens_here(screens);
  const size_t sizes[] = {2, 37, 129, 301};
  const size_t dims[] = {3, 33, 128};
  for (int variant = 0; variant < 4; variant++) {
    if (variant == 1)
      g_setenv("KNNWB_CPU_SCAN", "scalar", TRUE);
    if (variant == 2)
      g_setenv("KNNWB_CPU_SCAN", "avx2", TRUE);
    if (variant == 3) {
      g_unsetenv("KNNWB_CPU_SCAN");
      g_setenv("KNNWB_CPU_GEMM", "openblas", TRUE);
    }
    for (size_t mi = 0; mi < G_N_ELEMENTS(all_metrics); mi++)
      for (size_t si = 0; si < G_N_ELEMENTS(sizes); si++)
        for (size_t di = 0; di < G_N_ELEMENTS(dims); di++) {
          const size_t n = sizes[si], d = dims[di];
          /* Long rows (d = 128, the metafeatures' width) only with the most rows, and there only
           * pearson and euclidean: the oracle costs O(n^2 d), its ranks O(d^2) per pair. The
           * variants need coverage, not size. */
          if ((d == 128) != (n == 301))
            continue;
          if (n == 301 && all_metrics[mi] != KNNWB_METRIC_PEARSON &&
              all_metrics[mi] != KNNWB_METRIC_EUCLIDEAN)
            continue;
          if (variant > 0 && (n > 129 || d != 33))
            continue;
          if (all_metrics[mi] == KNNWB_METRIC_SPEARMAN && n * d > 37 * 33)
            continue;
          g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(n, d, (guint32)(n * 7 + d + mi));
          g_autoptr(KnnwbMatrix) q = knnwb_test_random_matrix(n / 2 + 1, d, (guint32)(n + mi));
          const size_t ks[] = {1, MIN((size_t)5, n - 1), n - 1};
          for (size_t ki = 0; ki < G_N_ELEMENTS(ks); ki++) {
            g_autoptr(KnnwbNeighbors) first = NULL;
            g_autoptr(KnnwbNeighbors) first_query = NULL;
            const size_t screens_used = variant == 3 ? 1 : n_screens;
            for (size_t s = 0; s < screens_used; s++) {
              if (g_test_verbose())
                g_printerr("variant %d %s n=%zu d=%zu k=%zu %s\n", variant,
                           knnwb_metric_to_string(all_metrics[mi]), n, d, ks[ki],
                           knnwb_screen_to_string(screens[s]));
              KnnwbNeighbors *nb = run(m, NULL, all_metrics[mi], ks[ki], screens[s], 64 << 10);
              KnnwbNeighbors *nq = run(q, m, all_metrics[mi], ks[ki], screens[s], 64 << 10);
              if (first == NULL) {
                /* The first screen against the oracle, the others byte for byte against it. */
                if (first == NULL)
                  oracle_check(all_metrics[mi], m->values, n, m->values, n, d, TRUE, nb, 1e-9);
                oracle_check(all_metrics[mi], q->values, q->n_rows, m->values, n, d, FALSE, nq,
                             1e-9);
                first = nb;
                first_query = nq;
              } else {
                assert_same_bytes(first, nb);
                assert_same_bytes(first_query, nq);
                knnwb_neighbors_free(nb);
                knnwb_neighbors_free(nq);
              }
            }
          }
        }
  }
  g_unsetenv("KNNWB_CPU_GEMM");
}

/*
 * Inputs aimed at the bound: near-ties 1e-4 apart (a fan of rows whose correlation with row 0
 * steps by 1e-4, 150 of them inside BF16's window, so its first candidates cannot certify and
 * the re-selection must), rows mixing components from 1e-6 to 1e6, exact duplicates, constant
 * offsets, k = 1 and k = n - 1. Every metric but spearman (ranks erase magnitudes) against the
 * oracle, BF16 = FP32 bytes.
 */
static void test_adversarial(void)
{
  KnnwbScreen screens[2];
  const size_t n_screens = screens_here(screens);
  const size_t n = 331, d = 40;
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(n, d, 4242);
  g_autoptr(GRand) rng = g_rand_new_with_seed(5);
  /* u, v: centred, orthonormal patterns. Rows 1..180: u + t v with corr(row, u) = 1 - 1e-4 i. */
  double u[40], v[40];
  for (size_t j = 0; j < d; j++) {
    u[j] = sin(0.7 * (double)j + 0.3);
    v[j] = cos(1.9 * (double)j + 0.1);
  }
  for (int pass = 0; pass < 2; pass++) {
    double *x = pass == 0 ? u : v, mean = 0, norm = 0;
    for (size_t j = 0; j < d; j++)
      mean += x[j] / (double)d;
    for (size_t j = 0; j < d; j++)
      x[j] -= mean;
    if (pass == 1) { /* v orthogonal to u */
      double dot = 0;
      for (size_t j = 0; j < d; j++)
        dot += u[j] * v[j];
      for (size_t j = 0; j < d; j++)
        v[j] -= dot * u[j];
    }
    for (size_t j = 0; j < d; j++)
      norm += x[j] * x[j];
    for (size_t j = 0; j < d; j++)
      x[j] /= sqrt(norm);
  }
  for (size_t i = 0; i <= 180; i++) {
    double r = 1.0 - 1e-4 * (double)i, t = sqrt(1.0 / (r * r) - 1.0);
    for (size_t j = 0; j < d; j++)
      m->values[i * d + j] = (float)(5.0 + u[j] + t * v[j]);
  }
  /* Rows 181..220: components from 1e-6 to 1e6 in one row. */
  for (size_t i = 181; i <= 220; i++)
    for (size_t j = 0; j < d; j++)
      m->values[i * d + j] =
          (float)(g_rand_double_range(rng, 0.5, 1.5) * pow(10.0, (double)((i + j) % 13) - 6.0));
  /* Rows 221..240: copies of rows 3 and 200 (duplicates); rows 241..250: row 7 plus 1e3. */
  for (size_t i = 221; i <= 240; i++)
    memcpy(m->values + i * d, m->values + (i % 2 ? 3 : 200) * d, d * sizeof(float));
  for (size_t i = 241; i <= 250; i++)
    for (size_t j = 0; j < d; j++)
      m->values[i * d + j] = m->values[7 * d + j] + 1e3f;
  const size_t ks[] = {1, 20, n - 1};
  for (size_t mi = 0; mi < G_N_ELEMENTS(all_metrics); mi++)
    for (size_t ki = 0; ki < G_N_ELEMENTS(ks); ki++) {
      if (all_metrics[mi] == KNNWB_METRIC_SPEARMAN)
        continue; /* ranks erase magnitudes; the oracle's ranks cost O(d^2) per pair */
      g_autoptr(KnnwbNeighbors) first = NULL;
      for (size_t s = 0; s < n_screens; s++) {
        if (g_test_verbose())
          g_printerr("%s k=%zu %s\n", knnwb_metric_to_string(all_metrics[mi]), ks[ki],
                     knnwb_screen_to_string(screens[s]));
        KnnwbNeighbors *nb = run(m, NULL, all_metrics[mi], ks[ki], screens[s], 256 << 10);
        /* Distances of rows with components near 1e6 are near 1e7: a relative tolerance. */
        const gboolean data_units =
            all_metrics[mi] == KNNWB_METRIC_EUCLIDEAN || all_metrics[mi] == KNNWB_METRIC_MANHATTAN;
        oracle_check(all_metrics[mi], m->values, n, m->values, n, d, TRUE, nb,
                     data_units ? 1e-3 : 1e-9);
        if (all_metrics[mi] == KNNWB_METRIC_PEARSON && ks[ki] == 20 &&
            screens[s] == KNNWB_SCREEN_BF16)
          g_assert_cmpuint(nb->n_reselected, >, 0); /* the fan cannot certify at first */
        if (first == NULL) {
          first = nb;
        } else {
          assert_same_bytes(first, nb);
          knnwb_neighbors_free(nb);
        }
      }
    }
}

/* Large k: k = 4096 of 4,200 rows (1,024 of 1,100 under ASan), BF16 = FP32 bytes (the FP32 lists
 * are checked against the oracle at large k in test_knn.c). */
static void test_large_k(void)
{
  KnnwbScreen screens[2];
  if (screens_here(screens) < 2) {
    g_test_skip("no BF16 on this CPU or build");
    return;
  }
  /* The sanitizer build is many times slower: a smaller k there (the same code paths). */
#if defined(__SANITIZE_ADDRESS__)
  const size_t n = 1100, k = 1024;
#else
  const size_t n = 4200, k = 4096;
#endif
  /* No duplicate rows (knnwb_test_random_matrix has some): the selection path, not the expansion.
   */
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(n, 6, NULL);
  g_autoptr(GRand) rng = g_rand_new_with_seed(31);
  for (size_t c = 0; c < n * 6; c++)
    m->values[c] = (float)g_rand_double_range(rng, -1, 1);
  g_autoptr(KnnwbNeighbors) fp32 = run(m, NULL, KNNWB_METRIC_PEARSON, k, KNNWB_SCREEN_FP32, 0);
  g_autoptr(KnnwbNeighbors) bf16 = run(m, NULL, KNNWB_METRIC_PEARSON, k, KNNWB_SCREEN_BF16, 0);
  assert_same_bytes(fp32, bf16);
  /* Spot-check a few rows against the oracle. */
  for (size_t i = 0; i < n; i += (n / 3)) {
    const double *got = fp32->distances + i * k;
    OracleItem *items = g_new(OracleItem, n);
    size_t count = 0;
    for (size_t j = 0; j < n; j++)
      if (j != i)
        items[count++] = (OracleItem){
            oracle_distance(KNNWB_METRIC_PEARSON, m->values + i * 6, m->values + j * 6, 6),
            (int64_t)j};
    qsort(items, count, sizeof *items, oracle_item_compare);
    for (size_t r = 0; r < k; r++)
      g_assert_cmpfloat_with_epsilon(got[r], items[r].distance, 1e-9);
    g_free(items);
  }
}

/* Rows with a common offset (every component near 8, d = 32): their cosine distances all lie
 * within BF16's window of each other, so no row certifies after the BF16 round. The CPU then
 * re-selects them in FP32, where they certify at once: each row re-selected once, not in round
 * after round until every row was a candidate (38 s for 20,000 x 128 rows). auto screens euclidean
 * and cosine in FP32 (BF16 left most rows of such data uncertified). */
static void test_offset_rows(void)
{
  KnnwbScreen screens[2];
  if (screens_here(screens) < 2) {
    g_test_skip("no BF16 on this CPU or build");
    return;
  }
  const size_t n = 1201, d = 32, k = 20;
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(n, d, NULL);
  g_autoptr(GRand) rng = g_rand_new_with_seed(77);
  for (size_t c = 0; c < n * d; c++)
    m->values[c] = (float)(8.0 + g_rand_double_range(rng, -1, 1));
  g_autoptr(KnnwbNeighbors) fp32 = run(m, NULL, KNNWB_METRIC_COSINE, k, KNNWB_SCREEN_FP32, 0);
  g_autoptr(KnnwbNeighbors) bf16 = run(m, NULL, KNNWB_METRIC_COSINE, k, KNNWB_SCREEN_BF16, 0);
  oracle_check(KNNWB_METRIC_COSINE, m->values, n, m->values, n, d, TRUE, fp32, 1e-9);
  assert_same_bytes(fp32, bf16);
  g_assert_cmpuint(bf16->n_reselected, >, 0);
  g_assert_cmpuint(bf16->n_reselected, <=, n);

  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = KNNWB_METRIC_EUCLIDEAN;
  options.k = k;
  options.backend = KNNWB_BACKEND_CPU;
  for (int metric = 0; metric < 2; metric++) {
    options.metric = metric == 0 ? KNNWB_METRIC_EUCLIDEAN : KNNWB_METRIC_COSINE;
    g_autoptr(KnnwbNeighbors) automatic = NULL;
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_knn_self(m, &options, &automatic, &error));
    g_assert_no_error(error);
    g_assert_cmpint(automatic->screen_used, ==, KNNWB_SCREEN_FP32);
  }
}

/* Rows in a few tight clusters (3,001 rows around 3 centres, d = 24, noise a fifth of the spread):
 * each row's k-th Pearson distance has dozens of rows within BF16's window past it, so BF16
 * certifies few rows and the rest pay a second, FP32 pass (on 50,000 x 64 rows of 50 Gaussian
 * clusters every row: 3.4-4.0 s against 0.95-1.2 s in FP32 alone). auto must screen in FP32 on
 * the CPU, where such rows certify at once; the lists are the same bytes either way. */
static void test_dense_rows(void)
{
  const size_t n = 3001, d = 24, k = 10;
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(n, d, NULL);
  g_autoptr(GRand) rng = g_rand_new_with_seed(2026);
  double centres[3][24];
  for (size_t c = 0; c < 3; c++)
    for (size_t j = 0; j < d; j++)
      centres[c][j] = g_rand_double_range(rng, -3, 3);
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < d; j++)
      m->values[i * d + j] = (float)(centres[i % 3][j] + 0.6 * g_rand_double_range(rng, -1, 1));
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = KNNWB_METRIC_PEARSON;
  options.k = k;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = 2;
  g_autoptr(KnnwbNeighbors) automatic = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_knn_self(m, &options, &automatic, &error));
  g_assert_no_error(error);
  g_assert_cmpint(automatic->screen_used, ==, KNNWB_SCREEN_FP32);
  g_assert_cmpuint(automatic->n_reselected, ==, 0);
  oracle_check(KNNWB_METRIC_PEARSON, m->values, n, m->values, n, d, TRUE, automatic, 1e-9);
  KnnwbScreen screens[2];
  if (screens_here(screens) == 2) {
    g_autoptr(KnnwbNeighbors) bf16 = run(m, NULL, KNNWB_METRIC_PEARSON, k, KNNWB_SCREEN_BF16, 0);
    assert_same_bytes(automatic, bf16);
    /* why auto does not take BF16 here: most rows need their FP32 pass after all */
    g_assert_cmpuint(bf16->n_reselected, >, n / 2);
  }
}

/* The exact list of row i against every other row by knnwb_prepared_distance, sorted by
 * (distance, index): what the engine must give bit for bit. */
static void brute_force_row(const KnnwbPrepared *p, size_t i, size_t k, int64_t *index,
                            double *distance)
{
  for (size_t r = 0; r < k; r++) {
    index[r] = -1;
    distance[r] = INFINITY;
  }
  for (size_t j = 0; j < p->n; j++) {
    if (j == i || (p->invalid != NULL && p->invalid[j]))
      continue;
    const double dj = knnwb_prepared_distance(p, i, p, j);
    if (!(dj < distance[k - 1]) && !(dj == distance[k - 1] && (int64_t)j < index[k - 1]))
      continue;
    size_t r = k - 1;
    while (r > 0 &&
           (distance[r - 1] > dj || (distance[r - 1] == dj && index[r - 1] > (int64_t)j))) {
      distance[r] = distance[r - 1];
      index[r] = index[r - 1];
      r--;
    }
    distance[r] = dj;
    index[r] = (int64_t)j;
  }
}

/* Dense ties: every row within the screening bound of most others. Two-column rows correlate by
 * +-1 (pearson) or 1 (abs-pearson) with every row up to rounding, rows of sparse counts alike up
 * to scale share one direction (cosine): each row's window holds most rows, round after round.
 * The engine then compares such rows with every row (n_exhaustive); before, it widened the
 * selection up to every row (20,011 x 2 abs-pearson k = 1: 39 s, now 5 s). Lists bit for bit
 * the brute force over knnwb_prepared_distance, and the double oracle; ordinary rows never take
 * the exhaustive path. */
static void test_dense_ties(void)
{
  const size_t n = 2001;
  g_autoptr(GRand) rng = g_rand_new_with_seed(77);
  g_autoptr(KnnwbMatrix) two = knnwb_matrix_new(n, 2, NULL);
  for (size_t v = 0; v < 2 * n; v++)
    two->values[v] = (float)g_rand_double_range(rng, -5, 5);
  const size_t dc = 9;
  g_autoptr(KnnwbMatrix) counts = knnwb_matrix_new(n, dc, NULL);
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < dc; j++) /* one value in one of 3 columns, any size: 3 directions */
      counts->values[i * dc + j] = j == i % 3 ? (float)g_rand_double_range(rng, 1, 8) : 0.0f;
  struct {
    const KnnwbMatrix *m;
    KnnwbMetric metric;
  } cases[] = {
      {two, KNNWB_METRIC_ABS_PEARSON}, {two, KNNWB_METRIC_PEARSON}, {counts, KNNWB_METRIC_COSINE}};
  static const size_t ks[] = {1, 7};
  for (size_t c = 0; c < G_N_ELEMENTS(cases); c++)
    for (size_t ki = 0; ki < G_N_ELEMENTS(ks); ki++) {
      const KnnwbMatrix *m = cases[c].m;
      const size_t k = ks[ki], d = m->n_cols;
      g_autoptr(KnnwbNeighbors) nb = run(m, NULL, cases[c].metric, k, KNNWB_SCREEN_FP32, 0);
      if (g_test_verbose())
        g_printerr("case %zu k %zu: %zu re-selected, %zu exhaustive\n", c, k, nb->n_reselected,
                   nb->n_exhaustive);
      g_assert_cmpuint(nb->n_exhaustive, >, n / 2);
      oracle_check(cases[c].metric, m->values, n, m->values, n, d, TRUE, nb, 1e-9);
      g_autoptr(GError) error = NULL;
      KnnwbPrepared p;
      g_assert_true(
          knnwb_prepared_init(&p, m, cases[c].metric, FALSE, "data", 1, NULL, NULL, &error));
      g_assert_no_error(error);
      int64_t *index = g_new(int64_t, k);
      double *distance = g_new(double, k);
      for (size_t i = 0; i < n; i += 7) {
        brute_force_row(&p, i, k, index, distance);
        g_assert_cmpmem(nb->indices + i * k, k * sizeof(int64_t), index, k * sizeof(int64_t));
        g_assert_cmpmem(nb->distances + i * k, k * sizeof(double), distance, k * sizeof(double));
      }
      g_free(index);
      g_free(distance);
      knnwb_prepared_clear(&p);
    }
  /* ordinary rows: certified by the screen, never compared with every row */
  g_autoptr(KnnwbMatrix) plain = knnwb_test_random_matrix(n, 24, 5);
  g_autoptr(KnnwbNeighbors) nb = run(plain, NULL, KNNWB_METRIC_PEARSON, 7, KNNWB_SCREEN_FP32, 0);
  g_assert_cmpuint(nb->n_exhaustive, ==, 0);
}

/* The re-selection rounds hold one batch of candidate lists at a time, sized to the memory
 * budget: 6,000 rows within 1e-4 of one direction (cosine distances near 1e-9, far inside FP32's
 * bound) need every row as a candidate, 6 batches of 77 MB at a 128 MB budget. Before, every
 * batch stayed allocated until the run returned (600 MB here; 7.6 GB for 20,000 rows at the
 * default budget). Measured as the peak resident size of a fresh process; not under
 * AddressSanitizer, whose quarantine keeps freed blocks resident. */
static void test_retry_memory(void)
{
#if defined(__SANITIZE_ADDRESS__)
  g_test_skip("AddressSanitizer keeps freed blocks resident");
#else
  if (!g_test_subprocess()) {
    g_test_trap_subprocess(NULL, 120 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_INHERIT_STDERR);
    g_test_trap_assert_passed();
    return;
  }
  /* re-selected, not compared with every row as a small round (6,000 x 6,000 pairs at d = 4) */
  g_setenv("KNNWB_CERTIFY_SMALL_WORK", "0", TRUE);
  const size_t n = 6000, d = 4, budget = (size_t)128 << 20;
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(n, d, NULL);
  g_autoptr(GRand) rng = g_rand_new_with_seed(3);
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < d; j++)
      m->values[i * d + j] = (float)(1.0 + (double)j + 1e-4 * g_rand_double_range(rng, -1, 1));
  struct rusage before, after;
  getrusage(RUSAGE_SELF, &before);
  g_autoptr(KnnwbNeighbors) nb = run(m, NULL, KNNWB_METRIC_COSINE, 5, KNNWB_SCREEN_FP32, budget);
  getrusage(RUSAGE_SELF, &after);
  g_assert_cmpuint(nb->n_reselected, >=, 3 * n); /* the rounds this test is about */
  const size_t grown = (size_t)(after.ru_maxrss - before.ru_maxrss) << 10;
  g_printerr("# peak resident size grew by %zu MiB\n", grown >> 20);
  g_assert_cmpuint(grown, <, 3 * budget);
#endif
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_add_func("/knn/screen-cpu/oracle", test_oracle);
  g_test_add_func("/knn/screen-cpu/adversarial", test_adversarial);
  g_test_add_func("/knn/screen-cpu/large-k", test_large_k);
  g_test_add_func("/knn/screen-cpu/offset-rows", test_offset_rows);
  g_test_add_func("/knn/screen-cpu/retry-memory", test_retry_memory);
  g_test_add_func("/knn/screen-cpu/dense-rows", test_dense_rows);
  g_test_add_func("/knn/screen-cpu/dense-ties", test_dense_ties);
  return g_test_run();
}
