/* The CPU kNN engine against a double-precision brute-force oracle. */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <knnwb/knnwb.h>
#include "cpu/cpu.h"
#include "engine/engine_internal.h"
#include "oracle.h"
#include "knnwb_test_matrix.h"
#include "knnwb_test_process.h"
#include "knnwb_test_lists.h"

static const KnnwbMetric all_metrics[] = {KNNWB_METRIC_PEARSON,   KNNWB_METRIC_ABS_PEARSON,
                                          KNNWB_METRIC_SPEARMAN,  KNNWB_METRIC_EUCLIDEAN,
                                          KNNWB_METRIC_MANHATTAN, KNNWB_METRIC_COSINE};

/* Random rows with planted structure: a third of the rows are noisy copies of a few centres, so
 * neighbours are meaningful and near-ties occur; integers every few rows make exact ties. */
static gboolean metric_needs_variance(KnnwbMetric metric)
{
  return metric == KNNWB_METRIC_PEARSON || metric == KNNWB_METRIC_ABS_PEARSON ||
         metric == KNNWB_METRIC_SPEARMAN;
}

static KnnwbNeighbors *run_self(const KnnwbMatrix *m, KnnwbMetric metric, size_t k, int threads,
                                size_t memory)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = metric;
  options.k = k;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = threads;
  options.memory_bytes = memory;
  KnnwbNeighbors *nb = NULL;
  g_autoptr(GError) error = NULL;
  gboolean ok = knnwb_knn_self(m, &options, &nb, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
  return nb;
}

static void test_oracle_all_metrics(void)
{
  /* Sizes: tiny, k+1, and non-multiples of every tile size (32-multiples up to 1024). */
  const size_t sizes[] = {2, 3, 6, 37, 129, 300};
  const size_t dims[] = {2, 5, 33};
  for (size_t mi = 0; mi < G_N_ELEMENTS(all_metrics); mi++)
    for (size_t si = 0; si < G_N_ELEMENTS(sizes); si++)
      for (size_t di = 0; di < G_N_ELEMENTS(dims); di++) {
        size_t n = sizes[si], d = dims[di];
        g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(n, d, (guint32)(n * 31 + d + mi));
        size_t ks[] = {1, MIN((size_t)5, n - 1), n - 1};
        for (size_t ki = 0; ki < G_N_ELEMENTS(ks); ki++) {
          if (g_test_verbose())
            g_printerr("%s n=%zu d=%zu k=%zu\n", knnwb_metric_to_string(all_metrics[mi]), n, d,
                       ks[ki]);
          /* 64 KiB forces 32 x 32 tiles: many tiles, diagonal and off-diagonal. */
          g_autoptr(KnnwbNeighbors) nb = run_self(m, all_metrics[mi], ks[ki], 2, 64 << 10);
          oracle_check(all_metrics[mi], m->values, n, m->values, n, d, TRUE, nb, 1e-9);
        }
      }
}

static void test_threads_and_budgets_identical(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(1100, 17, 7);
  for (size_t mi = 0; mi < G_N_ELEMENTS(all_metrics); mi++) {
    g_autoptr(KnnwbNeighbors) base = run_self(m, all_metrics[mi], 12, 1, 0);
    const int threads[] = {2, 3, 4};
    const size_t budgets[] = {16 << 10, 1 << 20, 64 << 20};
    for (size_t t = 0; t < G_N_ELEMENTS(threads); t++) {
      if (g_test_verbose())
        g_printerr("%s threads %d budget %zu\n", knnwb_metric_to_string(all_metrics[mi]),
                   threads[t], budgets[t]);
      g_autoptr(KnnwbNeighbors) other = run_self(m, all_metrics[mi], 12, threads[t], budgets[t]);
      knnwb_test_assert_same_lists(base, other);
    }
    if (g_getenv("KNNWB_TEST_ALL_ORACLE") != NULL || mi == 0)
      oracle_check(all_metrics[mi], m->values, 1100, m->values, 1100, 17, TRUE, base, 1e-9);
  }
}

static void test_exact_ties_lower_index_first(void)
{
  /* 60 identical rows (more than the candidate margin) and 40 others: every copy's neighbours
   * are the lowest-indexed other copies, all at distance 0. This also drives the re-selection. */
  const size_t n = 100, d = 6, k = 20;
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(n, d, 99);
  for (size_t i = 0; i < n; i++)
    if (i % 5 != 1)
      for (size_t j = 0; j < d; j++)
        m->values[i * d + j] = (float)(j * j) - 3.0f;
  for (size_t mi = 0; mi < G_N_ELEMENTS(all_metrics); mi++) {
    g_autoptr(KnnwbNeighbors) nb = run_self(m, all_metrics[mi], k, 2, 32 << 10);
    oracle_check(all_metrics[mi], m->values, n, m->values, n, d, TRUE, nb, 1e-9);
    /* Row 0's neighbours: copies 2, 3, 4, 5, 7, ... (every i with i % 5 != 1), in order. */
    size_t expect = 0, r = 0;
    for (size_t j = 1; r < k; j++)
      if (j % 5 != 1) {
        expect = j;
        g_assert_cmpint(nb->indices[r], ==, (int64_t)expect);
        g_assert_cmpfloat(nb->distances[r], ==, 0.0);
        r++;
      }
  }
}

/* Many exact duplicates, mixed: groups of copies of every size from 1 to 41 scattered over an odd
 * number of rows (first copies late, later copies early), affine images of a row (a distance of
 * exactly 0 for the correlations, not identical bytes), and k below, at and above the group sizes.
 * The engine collapses the copies before the search and expands them after: every metric must
 * still match the double oracle, ties by lower index. */
static void test_duplicates_against_oracle(void)
{
  const size_t n = 307, d = 7;
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(n, d, 1234);
  g_autoptr(GRand) rng = g_rand_new_with_seed(77);
  size_t row = 0;
  for (size_t size = 1; row < n - 20; size = size % 41 + 1) {
    /* A group of `size` copies of a random source row, at random places. */
    size_t source = (size_t)g_rand_int_range(rng, 0, (gint32)n);
    for (size_t c = 0; c < size && row < n - 20; c++, row++) {
      size_t target = (size_t)g_rand_int_range(rng, 0, (gint32)n);
      if (target != source)
        memcpy(m->values + target * d, m->values + source * d, d * sizeof(float));
    }
  }
  /* Rows 300..306: affine images of row 0 (2x + 1), and copies of those. */
  for (size_t i = 300; i < n; i++)
    for (size_t j = 0; j < d; j++)
      m->values[i * d + j] = 2.0f * m->values[j] + (i % 2 ? 1.0f : 0.0f);
  const size_t ks[] = {1, 5, 13, 50};
  for (size_t mi = 0; mi < G_N_ELEMENTS(all_metrics); mi++)
    for (size_t ki = 0; ki < G_N_ELEMENTS(ks); ki++) {
      g_autoptr(KnnwbNeighbors) nb = run_self(m, all_metrics[mi], ks[ki], 2, 64 << 10);
      oracle_check(all_metrics[mi], m->values, n, m->values, n, d, TRUE, nb, 1e-9);
      /* Thread counts and budgets change nothing, with duplicates too. */
      g_autoptr(KnnwbNeighbors) other = run_self(m, all_metrics[mi], ks[ki], 1, 0);
      knnwb_test_assert_same_lists(nb, other);
    }
}

/* Random rows stacked twice: row i and row i + n are the same bytes, so each is the other's nearest
 * row at distance exactly 0 for the correlation metrics (the row's dot with itself is its sum of
 * squares bit for bit), whatever d mod 8. With d == 2 every pair of rows correlates at +-1: the
 * list may then name any row at exactly 0, the lowest index first. */
static void test_copies_at_zero(void)
{
  const KnnwbMetric metrics[] = {KNNWB_METRIC_PEARSON, KNNWB_METRIC_COSINE, KNNWB_METRIC_SPEARMAN};
  const size_t dims[] = {2, 9, 10, 11, 15, 17, 63, 295};
  const size_t n = 200;
  for (size_t di = 0; di < G_N_ELEMENTS(dims); di++) {
    const size_t d = dims[di];
    g_autoptr(GRand) rng = g_rand_new_with_seed(4242 + (guint32)d);
    g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(2 * n, d, NULL);
    for (size_t c = 0; c < n * d; c++)
      m->values[c] = m->values[n * d + c] = (float)g_rand_double_range(rng, -3, 3);
    for (size_t mi = 0; mi < G_N_ELEMENTS(metrics); mi++) {
      g_autoptr(KnnwbNeighbors) nb = run_self(m, metrics[mi], 1, 2, 0);
      for (size_t i = 0; i < 2 * n; i++) {
        const int64_t copy = (int64_t)((i + n) % (2 * n)), got = nb->indices[i];
        if (nb->distances[i] != 0.0 ||
            (got != copy && knnwb_distance_exact(metrics[mi], m->values + i * d,
                                                 m->values + (size_t)got * d, d) != 0.0))
          g_error("%s d = %zu: row %zu lists %" G_GINT64_FORMAT " at %.17g, not its copy at 0",
                  knnwb_metric_to_string(metrics[mi]), d, i, got, nb->distances[i]);
      }
    }
  }
}

/* Every row the same (and three others): the lists are the lowest other indices at distance 0,
 * found in well under a second and little memory whatever the budget. Before duplicates were
 * collapsed, 20,000 copies took 57 s and 4.7 GB (the copies tie at the k-th distance and were
 * re-selected with ever more candidates, up to all rows). The subprocess runs with 1 GiB of
 * address space beyond what it maps at start (not under AddressSanitizer, which reserves far more)
 * and a 30 s timeout. */
static void test_duplicates_cost_nothing(void)
{
  if (g_test_subprocess()) {
#if !defined(__SANITIZE_ADDRESS__)
    g_assert_true(knnwb_test_cap_address_space((guint64)1 << 30));
#endif
    const size_t n = 20003, d = 8, k = 10;
    g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(n, d, NULL);
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < d; j++)
        m->values[i * d + j] = i < 20000 ? 1.5f : (float)(i + j);
    const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_MANHATTAN,
                                   KNNWB_METRIC_COSINE};
    for (size_t mi = 0; mi < G_N_ELEMENTS(metrics); mi++) {
      g_autoptr(KnnwbNeighbors) nb = run_self(m, metrics[mi], k, 2, 2 << 20);
      for (size_t i = 0; i < 20000; i += 997)
        for (size_t r = 0; r < k; r++) {
          g_assert_cmpint(nb->indices[i * k + r], ==, (int64_t)(r < i ? r : r + 1));
          g_assert_cmpfloat(nb->distances[i * k + r], ==, 0.0);
        }
    }
    return;
  }
  g_test_trap_subprocess(NULL, 30 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
}

static KnnwbNeighbors *run_query(const KnnwbMatrix *q, const KnnwbMatrix *ref, KnnwbMetric metric,
                                 size_t k, int threads, size_t memory)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = metric;
  options.k = k;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = threads;
  options.memory_bytes = memory;
  KnnwbNeighbors *nb = NULL;
  g_autoptr(GError) error = NULL;
  gboolean ok = knnwb_knn_query(q, ref, &options, &nb, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
  return nb;
}

/* The lists of rows on a line (x, 0), absent_row absent (missing values dropped: its zeros are
 * left out), x = 0, 0, 1, 3, 7, 0 for rows 0..5. */
static KnnwbMatrix *absent_line(size_t absent_row)
{
  static const float x[] = {0, 0, 1, 3, 7, 0};
  KnnwbMatrix *m = knnwb_matrix_new(G_N_ELEMENTS(x), 2, NULL);
  for (size_t i = 0; i < G_N_ELEMENTS(x); i++) {
    m->values[2 * i] = x[i];
    m->values[2 * i + 1] = 0.0f;
  }
  knnwb_matrix_set_row_absent(m, absent_row);
  return m;
}

/* Checks row i's list against the expected rows and distances (n of them; 0: no list). */
static void assert_list(const KnnwbNeighbors *nb, size_t i, size_t n, const int64_t *rows,
                        const double *distances)
{
  g_assert_cmpint(nb->n_found[i], ==, (int)n);
  for (size_t r = 0; r < n; r++) {
    g_assert_cmpint(nb->indices[i * nb->k + r], ==, rows[r]);
    g_assert_cmpfloat(nb->distances[i * nb->k + r], ==, distances[r]);
  }
}

/* An absent row holds zeros but is left out, while a row of zeros is a row like any other for
 * euclidean and manhattan: as copies of each other (the same bytes), the absent row took the zero
 * rows' place in every list, or left them without neighbours. Self lists with the absent row first
 * and second, the zero rows copies of each other; a query against the first. */
static void test_duplicates_absent_rows(void)
{
  const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_MANHATTAN};
  for (size_t mi = 0; mi < G_N_ELEMENTS(metrics); mi++)
    for (size_t absent = 0; absent < 2; absent++) {
      g_autoptr(KnnwbMatrix) m = absent_line(absent);
      g_autoptr(KnnwbNeighbors) nb = run_self(m, metrics[mi], 2, 2, 0);
      const int64_t zero = absent == 0 ? 1 : 0; /* the first zero row that is present */
      assert_list(nb, absent, 0, NULL, NULL);
      assert_list(nb, (size_t)zero, 2, (const int64_t[]){5, 2}, (const double[]){0, 1});
      assert_list(nb, 2, 2, (const int64_t[]){zero, 5}, (const double[]){1, 1});
      assert_list(nb, 3, 2, (const int64_t[]){2, zero}, (const double[]){2, 3});
      assert_list(nb, 4, 2, (const int64_t[]){3, 2}, (const double[]){4, 6});
      assert_list(nb, 5, 2, (const int64_t[]){zero, 2}, (const double[]){0, 1});
    }
  g_autoptr(KnnwbMatrix) ref = absent_line(0);
  g_autoptr(KnnwbMatrix) q = knnwb_matrix_new(2, 2, NULL);
  q->values[2] = 2.0f; /* rows (0, 0) and (2, 0) */
  g_autoptr(KnnwbNeighbors) nb = run_query(q, ref, KNNWB_METRIC_EUCLIDEAN, 2, 2, 0);
  assert_list(nb, 0, 2, (const int64_t[]){1, 5}, (const double[]){0, 0});
  assert_list(nb, 1, 2, (const int64_t[]){2, 3}, (const double[]){1, 1});
}

/* Copies among the reference rows (groups of 1 to 41 copies scattered, affine images of a row)
 * against query rows that are new, copies of reference rows, or copies of each other: the
 * reference's copies are collapsed before the search and expanded after it. Every metric matches
 * the double oracle, and the lists are the same bytes as those of the prepared-reference path
 * (knnwb_knn_reference_query, which searches every copy), with 1 or 2 threads and any budget. */
static void test_duplicates_query_against_oracle(void)
{
  const size_t nr = 311, nq = 53, d = 7;
  g_autoptr(KnnwbMatrix) ref = knnwb_test_random_matrix(nr, d, 4321);
  g_autoptr(KnnwbMatrix) q = knnwb_test_random_matrix(nq, d, 8765);
  g_autoptr(GRand) rng = g_rand_new_with_seed(78);
  size_t row = 0;
  for (size_t size = 1; row < nr - 20; size = size % 41 + 1) {
    size_t source = (size_t)g_rand_int_range(rng, 0, (gint32)nr);
    for (size_t c = 0; c < size && row < nr - 20; c++, row++) {
      size_t target = (size_t)g_rand_int_range(rng, 0, (gint32)nr);
      if (target != source)
        memcpy(ref->values + target * d, ref->values + source * d, d * sizeof(float));
    }
  }
  for (size_t i = 300; i < nr; i++)
    for (size_t j = 0; j < d; j++)
      ref->values[i * d + j] = 2.0f * ref->values[j] + (i % 2 ? 1.0f : 0.0f);
  /* Query rows 0..19: copies of reference rows; 20..29: copies of query row 0; the rest new. */
  for (size_t i = 0; i < 30; i++) {
    size_t source = i < 20 ? (size_t)g_rand_int_range(rng, 0, (gint32)nr) : 0;
    memcpy(q->values + i * d, (i < 20 ? ref->values : q->values) + source * d, d * sizeof(float));
  }
  const size_t ks[] = {1, 5, 13, 50};
  for (size_t mi = 0; mi < G_N_ELEMENTS(all_metrics); mi++) {
    KnnwbKnnOptions options;
    knnwb_knn_options_init(&options);
    options.metric = all_metrics[mi];
    options.backend = KNNWB_BACKEND_CPU;
    g_autoptr(GError) error = NULL;
    g_autoptr(KnnwbKnnReference) prepared = knnwb_knn_reference_new(ref, &options, &error);
    g_assert_no_error(error);
    for (size_t ki = 0; ki < G_N_ELEMENTS(ks); ki++) {
      g_autoptr(KnnwbNeighbors) nb = run_query(q, ref, all_metrics[mi], ks[ki], 2, 64 << 10);
      oracle_check(all_metrics[mi], q->values, nq, ref->values, nr, d, FALSE, nb, 1e-9);
      g_autoptr(KnnwbNeighbors) other = run_query(q, ref, all_metrics[mi], ks[ki], 1, 0);
      knnwb_test_assert_same_lists(nb, other);
      options.k = ks[ki];
      g_autoptr(KnnwbNeighbors) every_copy = NULL;
      g_assert_true(knnwb_knn_reference_query(prepared, q, &options, &every_copy, &error));
      g_assert_no_error(error);
      knnwb_test_assert_same_lists(nb, every_copy);
    }
  }
}

/* A reference of 20,000 identical rows (and three others) against 20,000 query rows: each list is
 * the lowest-indexed copies at one distance, found in well under a second and little memory. Before
 * the reference's copies were collapsed, the copies tied at the k-th distance and every query row
 * was re-selected with ever more candidates, up to all reference rows. Same limits as
 * duplicates/cost-nothing. */
static void test_duplicates_query_cost_nothing(void)
{
  if (g_test_subprocess()) {
#if !defined(__SANITIZE_ADDRESS__)
    g_assert_true(knnwb_test_cap_address_space((guint64)1 << 30));
#endif
    const size_t nr = 20003, nq = 20000, d = 8, k = 10;
    g_autoptr(KnnwbMatrix) ref = knnwb_matrix_new(nr, d, NULL);
    for (size_t i = 0; i < nr; i++)
      for (size_t j = 0; j < d; j++)
        ref->values[i * d + j] = i < 20000 ? 1.5f : (float)(i + j);
    g_autoptr(KnnwbMatrix) q = knnwb_matrix_new(nq, d, NULL);
    for (size_t i = 0; i < nq; i++)
      for (size_t j = 0; j < d; j++)
        q->values[i * d + j] = i % 2 == 0 ? 1.5f : 1.5f + 0.25f * (float)((i % 7) * (j + 1));
    const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_MANHATTAN};
    for (size_t mi = 0; mi < G_N_ELEMENTS(metrics); mi++) {
      g_autoptr(KnnwbNeighbors) nb = run_query(q, ref, metrics[mi], k, 2, 2 << 20);
      for (size_t i = 0; i < nq; i += 97) {
        for (size_t r = 0; r < k; r++) {
          g_assert_cmpint(nb->indices[i * k + r], ==, (int64_t)r);
          g_assert_cmpfloat(nb->distances[i * k + r], ==, nb->distances[i * k]);
        }
        if (i % 2 == 0)
          g_assert_cmpfloat(nb->distances[i * k], ==, 0.0);
      }
    }
    return;
  }
  g_test_trap_subprocess(NULL, 30 * G_USEC_PER_SEC, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
}

static void test_query_against_reference(void)
{
  g_autoptr(KnnwbMatrix) q = knnwb_test_random_matrix(45, 9, 3);
  g_autoptr(KnnwbMatrix) ref = knnwb_test_random_matrix(203, 9, 4);
  for (size_t mi = 0; mi < G_N_ELEMENTS(all_metrics); mi++) {
    KnnwbKnnOptions options;
    knnwb_knn_options_init(&options);
    options.metric = all_metrics[mi];
    options.k = 7;
    options.backend = KNNWB_BACKEND_CPU;
    options.memory_bytes = 20 << 10;
    g_autoptr(KnnwbNeighbors) nb = NULL;
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_knn_query(q, ref, &options, &nb, &error));
    g_assert_no_error(error);
    oracle_check(all_metrics[mi], q->values, 45, ref->values, 203, 9, FALSE, nb, 1e-9);
  }
}

static void test_large_k(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(700, 8, 11);
  g_autoptr(KnnwbNeighbors) nb = run_self(m, KNNWB_METRIC_EUCLIDEAN, 650, 2, 1 << 20);
  oracle_check(KNNWB_METRIC_EUCLIDEAN, m->values, 700, m->values, 700, 8, TRUE, nb, 1e-9);
}

/* The seed's File S1 sample: its .knn lists r (not 1 - r) for the three most anti-correlated rows;
 * our exact Pearson arithmetic must reproduce each listed r. The seed computed in float32 and
 * printed 6 decimals: 18 of its 30 values match the double-precision r to 5e-7 (printing), the
 * rest to 1.4e-6 (pair 1-4: seed -0.866238, exact -0.8662366380; numpy agrees with us), so the
 * tolerance is 1.5e-6. */
static void test_seed_sample_correlations(void)
{
  static const float sample[10][6] = {
      {1, 4.5f, 2, 7.3f, 8.21f, 5.71f}, {1, 3, 8, 6.66f, 7.19f, 1.06f},
      {3, 3, 9, 5, 6.67f, 7.73f},       {4, 4, 1, 4, 3.64f, 2.92f},
      {8, 7, 1.5f, 4, 4.91f, 6.15f},    {8, 6, 3, 2.4f, 7.36f, 4.76f},
      {3, 8, 3, 3.2f, 5.31f, 5.49f},    {2, 1, 4.02f, 5.8f, 3.08f, 7.15f},
      {4, 1, 3.7f, 2.2f, 1.31f, 1.48f}, {-3, 0, 3, 1, 3.82f, 2.7f}};
  g_autofree char *path = g_build_filename(KNNWB_SHARED_DATA_DIR, "cibm-sample.seed.knn", NULL);
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
  int checked = 0;
  for (int l = 1; lines[l] != NULL; l++) {
    int a, b;
    double r;
    if (sscanf(lines[l], "%d %d %lf", &a, &b, &r) != 3)
      continue;
    double distance = knnwb_distance_exact(KNNWB_METRIC_PEARSON, sample[a], sample[b], 6);
    g_assert_cmpfloat_with_epsilon(1.0 - distance, r, 1.5e-6);
    checked++;
  }
  g_assert_cmpint(checked, ==, 30);

  /* And the engine's own neighbours of the sample (most correlated) match the oracle. */
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(10, 6, NULL);
  memcpy(m->values, sample, sizeof sample);
  g_autoptr(KnnwbNeighbors) nb = run_self(m, KNNWB_METRIC_PEARSON, 3, 1, 0);
  oracle_check(KNNWB_METRIC_PEARSON, m->values, 10, m->values, 10, 6, TRUE, nb, 1e-12);
}

/* A self search on the CPU (threads: 0 for the default) fails with code and a message holding
 * fragment. */
static void expect_failure_threads(const KnnwbMatrix *m, KnnwbMetric metric, size_t k, int threads,
                                   int code, const char *fragment)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = metric;
  options.k = k;
  options.n_threads = threads;
  options.backend = KNNWB_BACKEND_CPU;
  g_autoptr(KnnwbNeighbors) nb = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_knn_self(m, &options, &nb, &error));
  g_assert_null(nb);
  g_assert_error(error, KNNWB_ERROR, code);
  if (strstr(error->message, fragment) == NULL)
    g_error("message '%s' lacks '%s'", error->message, fragment);
}

static void expect_failure(const KnnwbMatrix *m, KnnwbMetric metric, size_t k, int code,
                           const char *fragment)
{
  expect_failure_threads(m, metric, k, 0, code, fragment);
}

/* Screening precisions: names, the CPU backend refusing the GPU-only ones (and the GPU BF16), and
 * the bound's order (FP32 < FP16 < TF32 < BF16) and size (FP16 on d = 295: about 2^-10, as the
 * issue measured; BF16 about 2^-7). */
static void test_screen_precisions(void)
{
  KnnwbScreen screen = KNNWB_SCREEN_AUTO;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_screen_from_string("FP16", &screen, NULL));
  g_assert_cmpint(screen, ==, KNNWB_SCREEN_FP16);
  g_assert_cmpstr(knnwb_screen_to_string(KNNWB_SCREEN_TF32), ==, "tf32");
  g_assert_true(knnwb_screen_from_string("BF16", &screen, NULL));
  g_assert_cmpint(screen, ==, KNNWB_SCREEN_BF16);
  g_assert_false(knnwb_screen_from_string("int8", &screen, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  g_assert_cmpfloat(knnwb_screen_slack(KNNWB_SCREEN_FP32, 295), ==, 2.0 * 311 / 16777216.0);
  g_assert_cmpfloat(knnwb_screen_slack(KNNWB_SCREEN_FP16, 295), >, 1.0 / 1024);
  /* FP16 inputs (2^-10 and the accumulation) plus half scores (2^-11) */
  g_assert_cmpfloat(knnwb_screen_slack(KNNWB_SCREEN_FP16, 295), >, 1.5 / 1024);
  g_assert_cmpfloat(knnwb_screen_slack(KNNWB_SCREEN_FP16, 295), <, 1.6 / 1024);
  g_assert_cmpfloat(knnwb_screen_slack(KNNWB_SCREEN_TF32, 295), >, 2.0 / 1024);
  g_assert_cmpfloat(knnwb_screen_slack(KNNWB_SCREEN_BF16, 128), >, 1.0 / 128);
  g_assert_cmpfloat(knnwb_screen_slack(KNNWB_SCREEN_BF16, 128), <, 1.0 / 128 + 1.0 / 16384);
  g_assert_false(
      knnwb_screen_resolve(KNNWB_SCREEN_BF16, "cuda:1", KNNWB_METRIC_PEARSON, 20, &screen, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_clear_error(&error);
  /* The CPU: auto is FP32 for every metric, BF16 only when asked for (its window grows with the
   * rows: tests/core/test_knn_screen_cpu.c, /knn/screen-cpu/dense-rows). */
  for (KnnwbMetric metric = 0; metric <= KNNWB_METRIC_COSINE; metric++) {
    g_assert_true(knnwb_screen_resolve(KNNWB_SCREEN_AUTO, "cpu", metric, 20, &screen, NULL));
    g_assert_cmpint(screen, ==, KNNWB_SCREEN_FP32);
  }
  if (knnwb_cpu_gemm_has_bf16()) {
    g_assert_true(
        knnwb_screen_resolve(KNNWB_SCREEN_BF16, "cpu", KNNWB_METRIC_PEARSON, 20, &screen, NULL));
    g_assert_cmpint(screen, ==, KNNWB_SCREEN_BF16);
  }
  g_assert_true(
      knnwb_screen_resolve(KNNWB_SCREEN_AUTO, "cpu", KNNWB_METRIC_PEARSON, 4096, &screen, NULL));
  g_assert_cmpint(screen, ==, KNNWB_SCREEN_FP32);
  g_assert_true(
      knnwb_screen_resolve(KNNWB_SCREEN_AUTO, "cpu", KNNWB_METRIC_MANHATTAN, 20, &screen, NULL));
  g_assert_cmpint(screen, ==, KNNWB_SCREEN_FP32);
  g_assert_true(
      knnwb_screen_resolve(KNNWB_SCREEN_AUTO, "cuda:1", KNNWB_METRIC_PEARSON, 20, &screen, NULL));
  g_assert_cmpint(screen, ==, KNNWB_SCREEN_FP16);
  g_assert_true(
      knnwb_screen_resolve(KNNWB_SCREEN_AUTO, "cuda:1", KNNWB_METRIC_PEARSON, 4096, &screen, NULL));
  g_assert_cmpint(screen, ==, KNNWB_SCREEN_FP32);
  g_assert_true(
      knnwb_screen_resolve(KNNWB_SCREEN_FP16, "cuda:2", KNNWB_METRIC_MANHATTAN, 20, &screen, NULL));
  g_assert_cmpint(screen, ==, KNNWB_SCREEN_FP32);

  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(40, 6, 4);
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 3;
  options.backend = KNNWB_BACKEND_CPU;
  options.screen = KNNWB_SCREEN_FP16;
  KnnwbNeighbors *nb = NULL;
  g_assert_false(knnwb_knn_self(m, &options, &nb, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull(strstr(error->message, "needs the cuda backend"));
  g_assert_null(nb);
  options.screen = KNNWB_SCREEN_AUTO;
  g_clear_error(&error);
  g_assert_true(knnwb_knn_self(m, &options, &nb, &error));
  g_assert_cmpint(nb->screen_used, ==, KNNWB_SCREEN_FP32);
  knnwb_neighbors_free(nb);
}

/* (distance, index) order of the device refine's emulation below. */
static int refine_pair_compare(const void *a, const void *b)
{
  const double *x = a, *y = b;
  if (x[0] != y[0])
    return x[0] < y[0] ? -1 : 1;
  return x[1] < y[1] ? -1 : (x[1] > y[1]);
}

/* Preparing the rows follows the cancel flag (1,533,876 x 295 rows take 2 s: a Ctrl-C during it
 * waited for all of them): a raised flag gives CANCELLED and nothing allocated stays, for every
 * metric, one and two threads; a lowered one prepares as before. */
static void test_prepare_cancelled(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(5000, 9, 77);
  for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++)
    for (int threads = 1; threads <= 2; threads++) {
      KnnwbPrepared p;
      gint cancel = 1;
      g_autoptr(GError) error = NULL;
      g_assert_false(knnwb_prepared_init(&p, m, (KnnwbMetric)metric, FALSE, "data", threads, NULL,
                                         &cancel, &error));
      g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
      g_clear_error(&error);
      cancel = 0;
      g_assert_true(knnwb_prepared_init(&p, m, (KnnwbMetric)metric, FALSE, "data", threads, NULL,
                                        &cancel, &error));
      g_assert_no_error(error);
      knnwb_prepared_clear(&p);
    }
}

/* A GPU that refines its lists itself hands core the k nearest valid candidates, their worst
 * score and their count (kernels/lists_refine.cu); knnwb_refine_certify_row must then give what
 * knnwb_refine_row gives from the whole candidate list: the same lists (padding included) and the
 * same certificate. Random lists with empty slots, the row itself, fewer valid candidates than k,
 * every row a candidate, and scores both inside and outside the certificate's window. */
static void test_refine_certify_as_refine(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(203, 11, 31);
  g_autoptr(GError) error = NULL;
  KnnwbPrepared p;
  g_assert_true(
      knnwb_prepared_init(&p, m, KNNWB_METRIC_PEARSON, FALSE, "data", 1, NULL, NULL, &error));
  g_assert_no_error(error);
  knnwb_prepared_set_screen(&p, &p, KNNWB_SCREEN_FP32);
  g_autoptr(GRand) rng = g_rand_new_with_seed(32);
  const size_t available = m->n_rows - 1;
  static const size_t ks[] = {1, 7, 64, 150, 202};
  size_t certified = 0, uncertified = 0;
  for (size_t ki = 0; ki < G_N_ELEMENTS(ks); ki++)
    for (size_t i = 0; i < m->n_rows; i += 3) {
      const size_t k = ks[ki], kc = MIN(k + 8 + (size_t)g_rand_int_range(rng, 0, 20), 203);
      int64_t *index = g_new(int64_t, kc), *out_a = g_new(int64_t, k), *out_b = g_new(int64_t, k);
      float *score = g_new(float, kc);
      double *distance = g_new(double, kc), *dist_a = g_new(double, k), *dist_b = g_new(double, k);
      double *pairs = g_new(double, 2 * kc);
      /* kc distinct rows (the row itself among them now and then), some slots empty */
      const int64_t start = g_rand_int_range(rng, 0, (gint32)m->n_rows);
      const double shift = g_rand_double_range(rng, -0.3, 0.3);
      size_t valid = 0, n_pairs = 0;
      float worst = -INFINITY;
      for (size_t c = 0; c < kc; c++) {
        index[c] = (start + (int64_t)c) % (int64_t)m->n_rows;
        if (g_rand_int_range(rng, 0, 10) == 0)
          index[c] = -1;
        distance[c] = index[c] >= 0 ? knnwb_prepared_distance(&p, i, &p, (size_t)index[c]) : NAN;
        score[c] = index[c] >= 0 ? (float)(distance[c] + shift) : INFINITY;
        if (index[c] >= 0 && score[c] > worst)
          worst = score[c];
        if (index[c] >= 0 && index[c] != (int64_t)i) {
          pairs[2 * n_pairs] = distance[c];
          pairs[2 * n_pairs + 1] = (double)index[c];
          n_pairs++;
          valid++;
        }
      }
      gboolean a = knnwb_refine_row(&p, i, &p, (int64_t)i, index, score, distance, kc, available, k,
                                    NULL, out_a, dist_a);
      qsort(pairs, n_pairs, 2 * sizeof(double), refine_pair_compare);
      for (size_t r = 0; r < k; r++) { /* what the device writes; past the valid ones, junk */
        out_b[r] = r < n_pairs ? (int64_t)pairs[2 * r + 1] : 12345;
        dist_b[r] = r < n_pairs ? pairs[2 * r] : -1.0;
      }
      gboolean b = knnwb_refine_certify_row(&p, i, &p, worst, valid, available, k, out_b, dist_b);
      g_assert_cmpint(a, ==, b);
      g_assert_cmpmem(out_a, k * sizeof(int64_t), out_b, k * sizeof(int64_t));
      g_assert_cmpmem(dist_a, k * sizeof(double), dist_b, k * sizeof(double));
      if (a)
        certified++;
      else
        uncertified++;
      g_free(index);
      g_free(out_a);
      g_free(out_b);
      g_free(score);
      g_free(distance);
      g_free(dist_a);
      g_free(dist_b);
      g_free(pairs);
    }
  g_assert_cmpuint(certified, >, 0);
  g_assert_cmpuint(uncertified, >, 0);
  knnwb_prepared_clear(&p);
}

/* knnwb_refine_score_bound is the least float score whose lower bound clears the distance, for
 * every score kind, rows near and far from the origin, distances from 0 up. */
static void test_query_within_score_bound(void)
{
  g_autoptr(GRand) rng = g_rand_new_with_seed(41);
  for (size_t mi = 0; mi < G_N_ELEMENTS(all_metrics); mi++) {
    g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(61, 9, (guint32)(mi + 5));
    for (size_t t = 0; t < m->n_rows * m->n_cols; t++)
      m->values[t] += (float)(t % 9 == 0 ? 40 * (t % 5) : 0);
    g_autoptr(GError) error = NULL;
    KnnwbPrepared p;
    g_assert_true(
        knnwb_prepared_init(&p, m, all_metrics[mi], FALSE, "data", 1, NULL, NULL, &error));
    g_assert_no_error(error);
    knnwb_prepared_set_screen(&p, &p, KNNWB_SCREEN_FP32);
    size_t finite = 0;
    for (size_t i = 0; i < m->n_rows; i++)
      for (int trial = 0; trial < 8; trial++) {
        const double within = trial == 0 ? 0.0 : g_rand_double_range(rng, 0, 2.5) * trial;
        const float bound = knnwb_refine_score_bound(&p, i, &p, within);
        if (!isfinite(bound))
          continue;
        finite++;
        g_assert_cmpfloat(knnwb_refine_lower_bound(&p, i, &p, bound), >, within);
        g_assert_cmpfloat(knnwb_refine_lower_bound(&p, i, &p, nextafterf(bound, -INFINITY)), <=,
                          within);
      }
    g_assert_cmpuint(finite, >, m->n_rows);
    g_assert_true(isinf(knnwb_refine_score_bound(&p, 0, &p, INFINITY)));
    g_assert_true(isinf(knnwb_refine_score_bound(&p, 0, &p, NAN)));
    knnwb_prepared_clear(&p);
  }
}

/* Rows of small integers (exact ties across any split of the references); none constant; every
 * 23rd row a copy of the one before (duplicate references take their own path). */
static KnnwbMatrix *lattice_rows(size_t n, size_t d, guint32 seed)
{
  g_autoptr(GRand) rng = g_rand_new_with_seed(seed);
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < d; j++)
      m->values[i * d + j] = (float)g_rand_int_range(rng, -6, 7);
    m->values[i * d] = m->values[i * d + 1] + 1.0f + (float)(i % 3);
    if (i % 23 == 22)
      memcpy(m->values + i * d, m->values + (i - 1) * d, d * sizeof(float));
  }
  return m;
}

/* lists of q's rows among reference, k each, on the CPU; within: knnwb_knn_query_within. */
static KnnwbNeighbors *query_lists(const KnnwbMatrix *q, const KnnwbMatrix *reference,
                                   KnnwbMetric metric, size_t k, const double *within)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = metric;
  options.k = k;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = 2;
  g_autoptr(GError) error = NULL;
  KnnwbNeighbors *nb = NULL;
  const gboolean ok = within != NULL
                          ? knnwb_knn_query_within(q, reference, &options, within, &nb, &error)
                          : knnwb_knn_query(q, reference, &options, &nb, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
  return nb;
}

/*
 * The query rows' lists among references a, and among references b started from the k-th
 * distance of the first (knnwb_knn_query_within): merged by (distance, row) they are the lists
 * among b and a together (b's rows first, so that a pair of b tied with a row's k-th in a comes
 * first), byte for byte, for every metric, with exact ties at that k-th distance; some rows find
 * fewer than k within it (so the bound was used), each list is the unbounded one's entries within
 * its bound, and a row without a bound (+inf, NaN) gets its full list. A bound without the
 * screen's slack fails here.
 */
static void test_query_within_lists(void)
{
  const size_t k = 7, d = 6, na = 157, nb = 233;
  g_autoptr(KnnwbMatrix) q = lattice_rows(301, d, 1);
  g_autoptr(KnnwbMatrix) a = lattice_rows(na, d, 2);
  g_autoptr(KnnwbMatrix) b = lattice_rows(nb, d, 3);
  g_autoptr(KnnwbMatrix) ba = knnwb_matrix_new(na + nb, d, NULL);
  memcpy(ba->values, b->values, nb * d * sizeof(float));
  memcpy(ba->values + nb * d, a->values, na * d * sizeof(float));
  double *within = g_new(double, q->n_rows);
  for (size_t mi = 0; mi < G_N_ELEMENTS(all_metrics); mi++) {
    const KnnwbMetric metric = all_metrics[mi];
    g_autoptr(KnnwbNeighbors) in_a = query_lists(q, a, metric, k, NULL);
    g_autoptr(KnnwbNeighbors) in_ba = query_lists(q, ba, metric, k, NULL);
    for (size_t i = 0; i < q->n_rows; i++)
      within[i] = i % 17 == 5 ? INFINITY : i % 19 == 3 ? NAN : in_a->distances[i * k + k - 1];
    g_autoptr(KnnwbNeighbors) in_b = query_lists(q, b, metric, k, within);
    g_autoptr(KnnwbNeighbors) all_b = query_lists(q, b, metric, k, NULL);
    size_t short_rows = 0, ties = 0;
    for (size_t i = 0; i < q->n_rows; i++) {
      const int64_t *ia = in_a->indices + i * k, *ib = in_b->indices + i * k;
      const double *da = in_a->distances + i * k, *db = in_b->distances + i * k;
      const size_t found = (size_t)in_b->n_found[i];
      g_assert_cmpuint(found, <=, k);
      short_rows += found < k;
      if (!(within[i] < INFINITY))
        g_assert_cmpuint(found, ==, k);
      for (size_t r = found; r < k; r++) {
        g_assert_cmpint(ib[r], ==, -1);
        g_assert_true(isinf(db[r]));
      }
      for (size_t r = 0; r < found; r++)
        ties += db[r] == within[i];
      /* exactly the unbounded list's entries within the bound */
      for (size_t r = 0; r < k; r++) {
        const gboolean in = !(all_b->distances[i * k + r] > within[i]);
        g_assert_cmpint(ib[r], ==, in ? all_b->indices[i * k + r] : -1);
        if (in)
          g_assert_cmpfloat(db[r], ==, all_b->distances[i * k + r]);
        g_assert_cmpuint(r < found, ==, in);
      }
      size_t x = 0, y = 0;
      for (size_t r = 0; r < k; r++) {
        const gboolean take_b = y < found && (x >= k || db[y] <= da[x]);
        const int64_t index = take_b ? ib[y] : ia[x] + (int64_t)nb;
        const double distance = take_b ? db[y++] : da[x++];
        g_assert_cmpint(index, ==, in_ba->indices[i * k + r]);
        g_assert_cmpfloat(distance, ==, in_ba->distances[i * k + r]);
      }
    }
    g_test_message("%s: %zu of %zu rows found fewer than k within their bound, %zu ties at it",
                   knnwb_metric_to_string(metric), short_rows, q->n_rows, ties);
    g_assert_cmpuint(short_rows, >, q->n_rows / 10);
  }
  g_free(within);
}

/* A self search checks its rows in the prepare pass: the lowest row holding NaN or an infinite
 * value is named whichever thread meets which first (rows far apart, 1 and 4 threads), before a
 * degenerate row earlier in the data, for every metric; and a query search still names its own
 * rows before the reference's. */
static void test_bad_values_first(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(20000, 9, 7);
  for (size_t j = 0; j < 9; j++)
    m->values[3 * 9 + j] = 0.0f; /* degenerate: constant (pearson family), zeros (cosine) */
  m->values[19990 * 9 + 1] = NAN;
  m->values[12345 * 9 + 8] = INFINITY;
  m->values[12345 * 9 + 4] = -INFINITY;
  for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++)
    for (int threads = 1; threads <= 4; threads += 3)
      expect_failure_threads(m, metric, 5, threads, KNNWB_ERROR_INVALID_DATA,
                             "row 12345, column 4 (both counted from 0) holds an infinite value: "
                             "remove or impute missing values first");
  g_autoptr(KnnwbMatrix) query = knnwb_test_random_matrix(30, 9, 8);
  query->values[17 * 9 + 3] = NAN;
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 5;
  options.backend = KNNWB_BACKEND_CPU;
  g_autoptr(KnnwbNeighbors) nb = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_knn_query(query, m, &options, &nb, &error));
  g_assert_nonnull(strstr(error->message, "row 17, column 3 (both counted from 0) holds NaN"));
}

static void test_bad_inputs(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(8, 4, 1);
  knnwb_matrix_set_row_label(m, 2, "GENE_C");
  expect_failure(m, KNNWB_METRIC_PEARSON, 0, KNNWB_ERROR_INVALID_ARGUMENT, "at least 1");
  expect_failure(m, KNNWB_METRIC_PEARSON, 8, KNNWB_ERROR_INVALID_ARGUMENT, "k <= 7");
  m->values[2 * 4 + 1] = NAN;
  expect_failure(m, KNNWB_METRIC_EUCLIDEAN, 3, KNNWB_ERROR_INVALID_DATA,
                 "row 2 (GENE_C), column 1 (both counted from 0)");
  m->values[2 * 4 + 1] = INFINITY;
  expect_failure(m, KNNWB_METRIC_EUCLIDEAN, 3, KNNWB_ERROR_INVALID_DATA, "infinite");
  for (size_t j = 0; j < 4; j++)
    m->values[2 * 4 + j] = 1.5f;
  expect_failure(m, KNNWB_METRIC_PEARSON, 3, KNNWB_ERROR_INVALID_DATA,
                 "row 2 (GENE_C) (counted from 0) is constant");
  expect_failure(m, KNNWB_METRIC_SPEARMAN, 3, KNNWB_ERROR_INVALID_DATA, "--drop-degenerate");
  for (size_t j = 0; j < 4; j++)
    m->values[2 * 4 + j] = 0.0f;
  expect_failure(m, KNNWB_METRIC_COSINE, 3, KNNWB_ERROR_INVALID_DATA, "all zeros");

  /* One column: no correlation exists. */
  g_autoptr(KnnwbMatrix) column = knnwb_test_random_matrix(5, 1, 3);
  expect_failure(column, KNNWB_METRIC_PEARSON, 1, KNNWB_ERROR_INVALID_DATA, "at least 2 columns");

  /* One row: no neighbour exists for any k. */
  g_autoptr(KnnwbMatrix) one = knnwb_test_random_matrix(1, 4, 2);
  expect_failure(one, KNNWB_METRIC_EUCLIDEAN, 1, KNNWB_ERROR_INVALID_ARGUMENT,
                 "a kNN graph needs at least 2 rows");

  /* Ragged query/reference widths. */
  g_autoptr(KnnwbMatrix) q = knnwb_test_random_matrix(3, 5, 2);
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 1;
  g_autoptr(GError) error = NULL;
  KnnwbNeighbors *nb = NULL;
  g_assert_false(knnwb_knn_query(q, m, &options, &nb, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);

  /* Absurd sizes fail cleanly instead of allocating. */
  g_clear_error(&error);
  g_assert_null(knnwb_matrix_new(SIZE_MAX / 2, 3, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY);
}

static void test_refused_up_front(void)
{
  /* 2^36 rows that were never allocated: the run must be refused before touching them. */
  float dummy[4] = {0};
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new_wrapped((size_t)1 << 36, 4, dummy, NULL, NULL);
  expect_failure(m, KNNWB_METRIC_EUCLIDEAN, 10, KNNWB_ERROR_NO_MEMORY, "only");
}

static void test_empty_input(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(0, 4, NULL);
  g_autoptr(KnnwbNeighbors) nb = run_self(m, KNNWB_METRIC_PEARSON, 3, 2, 0);
  g_assert_cmpuint(nb->n_queries, ==, 0);
  igraph_t graph;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  g_assert_true(knnwb_graph_from_neighbors(nb, KNNWB_GRAPH_UNION, &graph, &weights, NULL));
  g_assert_cmpint(igraph_vcount(&graph), ==, 0);
  igraph_destroy(&graph);
  igraph_vector_destroy(&weights);
}

static void test_drop_degenerate(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(30, 6, 5);
  for (size_t j = 0; j < 6; j++) {
    m->values[4 * 6 + j] = 2.0f;
    m->values[17 * 6 + j] = -1.0f;
  }
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 4;
  options.backend = KNNWB_BACKEND_CPU;
  options.drop_degenerate = TRUE;
  g_autoptr(KnnwbNeighbors) nb = NULL;
  g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING,
                        "*2 rows left out*row 4, counted from 0*");
  g_assert_true(knnwb_knn_self(m, &options, &nb, NULL));
  g_test_assert_expected_messages();
  g_assert_cmpint(nb->n_found[4], ==, 0);
  g_assert_cmpint(nb->n_found[17], ==, 0);
  for (size_t i = 0; i < 30; i++)
    for (size_t r = 0; r < (size_t)nb->n_found[i]; r++) {
      g_assert_cmpint(nb->indices[i * 4 + r], !=, 4);
      g_assert_cmpint(nb->indices[i * 4 + r], !=, 17);
    }
  igraph_t graph;
  igraph_vector_t weights;
  igraph_vector_init(&weights, 0);
  g_assert_true(knnwb_graph_from_neighbors(nb, KNNWB_GRAPH_DIRECTED, &graph, &weights, NULL));
  g_assert_cmpint(igraph_vcount(&graph), ==, 30);
  g_assert_cmpint(igraph_ecount(&graph), ==, 28 * 4);
  igraph_destroy(&graph);
  igraph_vector_destroy(&weights);
}

static void test_graph_modes(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(57, 7, 21);
  g_autoptr(KnnwbNeighbors) nb = run_self(m, KNNWB_METRIC_EUCLIDEAN, 4, 2, 0);
  const size_t n = 57, k = 4;
  /* Brute-force adjacency: in[i][j] = j in kNN(i). */
  gboolean in[57][57] = {{0}};
  for (size_t i = 0; i < n; i++)
    for (size_t r = 0; r < k; r++)
      in[i][nb->indices[i * k + r]] = TRUE;
  for (int mode = KNNWB_GRAPH_DIRECTED; mode <= KNNWB_GRAPH_MUTUAL; mode++) {
    igraph_t graph;
    igraph_vector_t weights;
    igraph_vector_init(&weights, 0);
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_graph_from_neighbors(nb, (KnnwbGraphMode)mode, &graph, &weights, &error));
    g_assert_cmpint(igraph_vcount(&graph), ==, (igraph_integer_t)n);
    size_t expected = 0;
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < n; j++) {
        if (mode == KNNWB_GRAPH_DIRECTED)
          expected += in[i][j];
        else if (i < j)
          expected += mode == KNNWB_GRAPH_UNION ? (in[i][j] || in[j][i]) : (in[i][j] && in[j][i]);
      }
    g_assert_cmpint(igraph_ecount(&graph), ==, (igraph_integer_t)expected);
    g_assert_cmpint(igraph_is_directed(&graph), ==, mode == KNNWB_GRAPH_DIRECTED);
    for (igraph_integer_t e = 0; e < igraph_ecount(&graph); e++) {
      igraph_integer_t from = IGRAPH_FROM(&graph, e), to = IGRAPH_TO(&graph, e);
      if (mode == KNNWB_GRAPH_DIRECTED) {
        g_assert_true(in[from][to]);
        g_assert_cmpint(to, ==, nb->indices[(size_t)e]); /* rank order kept */
      } else {
        g_assert_true(mode == KNNWB_GRAPH_UNION ? (in[from][to] || in[to][from])
                                                : (in[from][to] && in[to][from]));
      }
      double truth =
          knnwb_distance_exact(KNNWB_METRIC_EUCLIDEAN, m->values + from * 7, m->values + to * 7, 7);
      g_assert_cmpfloat_with_epsilon(VECTOR(weights)[e], truth, 1e-12);
    }
    igraph_destroy(&graph);
    igraph_vector_destroy(&weights);
  }
}

static void count_progress(uint64_t done, uint64_t total, void *data)
{
  uint64_t *last = data;
  g_assert_cmpuint(done, <=, total);
  last[0] = done;
  last[1] = total;
}

static void test_progress_and_cancel(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(500, 8, 8);
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 5;
  options.backend = KNNWB_BACKEND_CPU;
  options.memory_bytes = 16 << 10;
  uint64_t seen[2] = {0, 0};
  options.progress = count_progress;
  options.progress_data = seen;
  g_autoptr(KnnwbNeighbors) nb = NULL;
  g_assert_true(knnwb_knn_self(m, &options, &nb, NULL));
  g_assert_cmpuint(seen[1], >, 1);
  g_assert_cmpuint(seen[0], ==, seen[1]);

  volatile gint cancel = 1;
  options.cancel = &cancel;
  g_autoptr(KnnwbNeighbors) none = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_false(knnwb_knn_self(m, &options, &none, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
  g_assert_null(none);
}

/* Euclidean on uncentred or extreme data: raw intensities around 1e4 with differences near 1 (an
 * offset must not cost precision and force re-selection), values near 1e20 (float squares would
 * overflow) and near 1e-20 (they would underflow). Every case against the oracle. */
static void test_euclidean_offsets_and_magnitudes(void)
{
  const double scales[] = {1.0, 1e20, 1e-20};
  const double offsets[] = {0.0, 1e4, 0.0};
  for (size_t c = 0; c < G_N_ELEMENTS(scales); c++) {
    g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(403, 13, 31 + (guint32)c);
    for (size_t i = 0; i < 403 * 13; i++)
      m->values[i] = (float)(offsets[c] + scales[c] * m->values[i]);
    g_autoptr(KnnwbNeighbors) nb = run_self(m, KNNWB_METRIC_EUCLIDEAN, 9, 2, 64 << 10);
    oracle_check(KNNWB_METRIC_EUCLIDEAN, m->values, 403, m->values, 403, 13, TRUE, nb,
                 1e-9 * scales[c]);
    g_autoptr(KnnwbMatrix) q = knnwb_test_random_matrix(21, 13, 5);
    for (size_t i = 0; i < 21 * 13; i++)
      q->values[i] = (float)(offsets[c] + scales[c] * q->values[i]);
    KnnwbKnnOptions options;
    knnwb_knn_options_init(&options);
    options.metric = KNNWB_METRIC_EUCLIDEAN;
    options.k = 5;
    options.backend = KNNWB_BACKEND_CPU;
    g_autoptr(KnnwbNeighbors) nq = NULL;
    g_autoptr(GError) error = NULL;
    g_assert_true(knnwb_knn_query(q, m, &options, &nq, &error));
    g_assert_no_error(error);
    oracle_check(KNNWB_METRIC_EUCLIDEAN, q->values, 21, m->values, 403, 13, FALSE, nq,
                 1e-9 * scales[c]);
  }
}

static void test_nearest_outside_group(void)
{
  const size_t n = 301, d = 7;
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(n, d, 17);
  /* Duplicate some rows across groups to force exact ties (lower index must win). */
  for (size_t i = 200; i < 240; i++)
    memcpy(m->values + i * d, m->values + (i - 200) * d, d * sizeof(float));
  int32_t *group = g_new(int32_t, n);
  int64_t rows[] = {0, 1, 5, 17, 99, 150, 200, 201, 239, 250, 300};
  const size_t n_rows = G_N_ELEMENTS(rows);
  for (size_t mi = 0; mi < G_N_ELEMENTS(all_metrics); mi++)
    for (int layout = 0; layout < 3; layout++) {
      /* layout 0: 3 groups; 1: one giant group + singletons; 2: everything in one group. */
      for (size_t i = 0; i < n; i++)
        group[i] = layout == 0 ? (int32_t)(i % 3) : layout == 1 ? (i < 280 ? 0 : (int32_t)i) : 4;
      KnnwbKnnOptions options;
      knnwb_knn_options_init(&options);
      options.metric = all_metrics[mi];
      options.backend = KNNWB_BACKEND_CPU;
      options.memory_bytes = 32 << 10;
      g_autoptr(GError) error = NULL;
      g_autoptr(KnnwbOutsideSearch) search = knnwb_outside_search_new(m, &options, &error);
      g_assert_no_error(error);
      int64_t index[G_N_ELEMENTS(rows)];
      double distance[G_N_ELEMENTS(rows)];
      g_assert_true(knnwb_outside_search_run(search, group, rows, n_rows, index, distance, &error));
      g_assert_no_error(error);
      for (size_t t = 0; t < n_rows; t++) {
        size_t i = (size_t)rows[t];
        double best = INFINITY;
        int64_t best_j = -1;
        for (size_t j = 0; j < n; j++) {
          if (group[j] == group[i])
            continue;
          double dist = oracle_distance(all_metrics[mi], m->values + i * d, m->values + j * d, d);
          if (dist < best - 1e-12) {
            best = dist;
            best_j = (int64_t)j;
          }
        }
        if (best_j < 0) {
          g_assert_cmpint(index[t], ==, -1);
          continue;
        }
        g_assert_cmpfloat_with_epsilon(distance[t], best, 1e-9);
        double truth =
            oracle_distance(all_metrics[mi], m->values + i * d, m->values + index[t] * d, d);
        g_assert_cmpfloat_with_epsilon(truth, best, 1e-9);
        g_assert_cmpint(group[index[t]], !=, group[i]);
        if (fabs(truth - best) == 0.0 && best == 0.0)
          g_assert_cmpint(index[t], ==, best_j); /* exact duplicates: lower index */
      }
    }
  g_free(group);
}

/* Dense ties for the nearest row outside a group: two-column rows correlate by +-1 with every row
 * up to rounding, so every row's window holds most rows and the certify loop compares them with
 * every row outside their group. The answers are the brute force over the same exact distances
 * (knnwb_prepared_distance), ties to the lower index, bit for bit. */
static void test_nearest_outside_dense_ties(void)
{
  const size_t n = 401, d = 2;
  g_autoptr(GRand) rng = g_rand_new_with_seed(2011);
  g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(n, d, NULL);
  for (size_t v = 0; v < n * d; v++)
    m->values[v] = (float)g_rand_double_range(rng, -3, 3);
  g_autofree int32_t *group = g_new(int32_t, n);
  g_autofree int64_t *rows = g_new(int64_t, n);
  g_autofree int64_t *index = g_new(int64_t, n);
  g_autofree double *distance = g_new(double, n);
  for (size_t i = 0; i < n; i++) {
    group[i] = (int32_t)(i % 3);
    rows[i] = (int64_t)i;
  }
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_ABS_PEARSON, KNNWB_METRIC_PEARSON};
  for (size_t mi = 0; mi < G_N_ELEMENTS(metrics); mi++) {
    KnnwbKnnOptions options;
    knnwb_knn_options_init(&options);
    options.metric = metrics[mi];
    options.backend = KNNWB_BACKEND_CPU;
    g_autoptr(GError) error = NULL;
    g_autoptr(KnnwbOutsideSearch) search = knnwb_outside_search_new(m, &options, &error);
    g_assert_no_error(error);
    g_assert_true(knnwb_outside_search_run(search, group, rows, n, index, distance, &error));
    g_assert_no_error(error);
    KnnwbPrepared p;
    g_assert_true(knnwb_prepared_init(&p, m, metrics[mi], FALSE, "data", 1, NULL, NULL, &error));
    for (size_t i = 0; i < n; i++) {
      int64_t best = -1;
      double best_distance = INFINITY;
      for (size_t j = 0; j < n; j++) {
        const double dist = knnwb_prepared_distance(&p, i, &p, j);
        if (group[j] != group[i] && (best < 0 || dist < best_distance)) {
          best = (int64_t)j;
          best_distance = dist;
        }
      }
      g_assert_cmpint(index[i], ==, best);
      g_assert_cmpmem(&distance[i], sizeof(double), &best_distance, sizeof(double));
    }
    knnwb_prepared_clear(&p);
  }
}

/* More threads than a bound process may run on (mpirun's binding, here set by hand): one warning
 * naming the affinity and what to pass to mpirun; the count asked for is kept. Within the
 * affinity, and with the default count (which follows it), nothing is said. */
static void test_threads_bound_process(void)
{
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
    g_test_skip("one online CPU: no narrower affinity to set");
    return;
  }
  if (g_test_subprocess()) {
    g_log_set_always_fatal(G_LOG_FATAL_MASK); /* the warning is the point: not fatal here */
    cpu_set_t all, one;
    g_assert_cmpint(sched_getaffinity(0, sizeof all, &all), ==, 0);
    CPU_ZERO(&one);
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
      if (CPU_ISSET(cpu, &all)) {
        CPU_SET(cpu, &one);
        break;
      }
    g_assert_cmpint(sched_setaffinity(0, sizeof one, &one), ==, 0);
    g_assert_cmpint(knnwb_thread_count(0), ==, 1);
    g_assert_cmpint(knnwb_thread_count(1), ==, 1);
    fprintf(stderr, "no warning so far\n");
    g_assert_cmpint(knnwb_thread_count(2), ==, 2);
    g_assert_cmpint(knnwb_thread_count(3), ==, 3); /* once per process */
    return;
  }
  g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
  g_test_trap_assert_passed();
  g_test_trap_assert_stderr("*no warning so far*2 threads asked for, but this process may only run "
                            "on 1 of the machine's*--bind-to none*");
  g_test_trap_assert_stderr_unmatched("*3 threads asked for*");
}

int main(int argc, char **argv)
{
  igraph_set_error_handler(igraph_error_handler_ignore);
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/knn/oracle/all-metrics", test_oracle_all_metrics);
  g_test_add_func("/knn/threads-and-budgets-identical", test_threads_and_budgets_identical);
  g_test_add_func("/knn/exact-ties", test_exact_ties_lower_index_first);
  g_test_add_func("/knn/query", test_query_against_reference);
  g_test_add_func("/knn/duplicates/oracle", test_duplicates_against_oracle);
  g_test_add_func("/knn/duplicates/cost-nothing", test_duplicates_cost_nothing);
  g_test_add_func("/knn/duplicates/copies-at-zero", test_copies_at_zero);
  g_test_add_func("/knn/duplicates/query-oracle", test_duplicates_query_against_oracle);
  g_test_add_func("/knn/duplicates/absent-rows", test_duplicates_absent_rows);
  g_test_add_func("/knn/duplicates/query-cost-nothing", test_duplicates_query_cost_nothing);
  g_test_add_func("/knn/large-k", test_large_k);
  g_test_add_func("/knn/seed-sample", test_seed_sample_correlations);
  g_test_add_func("/knn/bad-inputs", test_bad_inputs);
  g_test_add_func("/knn/bad-values-first", test_bad_values_first);
  g_test_add_func("/knn/screen-precisions", test_screen_precisions);
  g_test_add_func("/knn/refine/certify-as-refine", test_refine_certify_as_refine);
  g_test_add_func("/knn/query-within/score-bound", test_query_within_score_bound);
  g_test_add_func("/knn/query-within/lists", test_query_within_lists);
  g_test_add_func("/knn/empty", test_empty_input);
  g_test_add_func("/knn/refused-up-front", test_refused_up_front);
  g_test_add_func("/knn/nearest-outside-group", test_nearest_outside_group);
  g_test_add_func("/knn/nearest-outside-dense-ties", test_nearest_outside_dense_ties);
  g_test_add_func("/knn/euclidean-offsets-and-magnitudes", test_euclidean_offsets_and_magnitudes);
  g_test_add_func("/knn/drop-degenerate", test_drop_degenerate);
  g_test_add_func("/knn/graph-modes", test_graph_modes);
  g_test_add_func("/knn/progress-and-cancel", test_progress_and_cancel);
  g_test_add_func("/knn/prepare-cancelled", test_prepare_cancelled);
  g_test_add_func("/knn/threads-bound-process", test_threads_bound_process);
  (void)metric_needs_variance;
  return g_test_run();
}
