/* The certify loop's small rounds: the few rows a screened round left uncertified are compared with
 * every row (knnwb_certify_small), with the reference rows split among the threads when the rows
 * are fewer than the threads can share (knnwb_exhaustive_run). Their lists must be the bytes the
 * screened rounds give, the brute force over knnwb_prepared_distance (exact ties by lower index),
 * and the double oracle's. The path is asserted from the debug lines. */
#include <math.h>
#include <string.h>
#include <knnwb/knnwb.h>
#include "engine/engine.h"
#include "oracle.h"

/* (abs-pearson would find the noise rows, anti-correlated with the centres, nearest) */
static const KnnwbMetric metrics[] = {KNNWB_METRIC_PEARSON, KNNWB_METRIC_EUCLIDEAN,
                                      KNNWB_METRIC_MANHATTAN, KNNWB_METRIC_COSINE};

/* What the debug lines said during the last search. */
static gboolean small_round;   /* a small round compared its rows with every row */
static gboolean screened;      /* a round re-selected rows with more candidates */
static size_t slices_used;     /* the most reference slices of a small round */
static size_t small_rows_seen; /* the most rows of a small round */

static void capture(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data)
{
  g_log_default_handler(domain, level, message, data); /* G_MESSAGES_DEBUG shows them */
  if (!(level & G_LOG_LEVEL_DEBUG))
    return;
  size_t rows, reference, slices;
  const char *small = strstr(message, "small round: ");
  if (small != NULL && sscanf(small, "small round: %zu row(s)", &rows) == 1) {
    small_round = TRUE;
    small_rows_seen = MAX(small_rows_seen, rows);
  }
  if (strstr(message, "re-selected with") != NULL)
    screened = TRUE;
  const char *split = strstr(message, "knnwb: ");
  if (split != NULL && sscanf(split, "knnwb: %zu row(s) compared with %zu rows in %zu slices",
                              &rows, &reference, &slices) == 3)
    slices_used = MAX(slices_used, slices);
}

/* The search on the CPU in FP32 with threads threads; with screened_only the small rounds are
 * turned off (every round re-selects). */
static KnnwbNeighbors *search(const KnnwbMatrix *m, const KnnwbMatrix *reference,
                              KnnwbMetric metric, size_t k, int threads, gboolean screened_only)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.metric = metric;
  options.k = k;
  options.backend = KNNWB_BACKEND_CPU;
  options.screen = KNNWB_SCREEN_FP32;
  options.n_threads = threads;
  if (screened_only)
    g_setenv("KNNWB_CERTIFY_SMALL_WORK", "0", TRUE);
  else
    g_unsetenv("KNNWB_CERTIFY_SMALL_WORK");
  small_round = screened = FALSE;
  slices_used = small_rows_seen = 0;
  KnnwbNeighbors *nb = NULL;
  g_autoptr(GError) error = NULL;
  gboolean ok = reference ? knnwb_knn_query(m, reference, &options, &nb, &error)
                          : knnwb_knn_self(m, &options, &nb, &error);
  g_unsetenv("KNNWB_CERTIFY_SMALL_WORK");
  g_assert_no_error(error);
  g_assert_true(ok);
  return nb;
}

/* Rows of 18 columns in three blocks of 6. Centres: ones on block A (or B); around each, 30
 * "stars": the centre's block holding 3 and 1 in two of its columns, every placement, all at one
 * distance from the centre in every metric (the same differences, permuted), spread over the row
 * numbers so that every slice of the references holds some. Other rows: noise in block R, far from
 * the centres and stars in every metric. Rows copy_from.. are copies of stars (exact duplicates).
 */
typedef struct {
  KnnwbMatrix *m;
  size_t centres[2], n_centres;
} TieRows;

static void tie_rows_star(float *row, size_t block, size_t placement)
{
  size_t three = placement / 5, one = placement % 5;
  one += one >= three; /* the 30 ordered pairs of distinct columns */
  row[6 * block + three] = 3.0f;
  row[6 * block + one] = 1.0f;
}

static TieRows tie_rows_new(size_t n_noise, size_t n_centres, size_t copies, guint32 seed)
{
  const size_t d = 18, stars = 30 * n_centres, n = n_noise + n_centres + stars + copies;
  TieRows rows = {knnwb_matrix_new(n, d, NULL), {0, 0}, n_centres};
  g_autoptr(GRand) rng = g_rand_new_with_seed(seed);
  /* every row's kind: noise, then centres and stars put at spread row numbers */
  int *kind = g_new(int, n); /* -1 noise, 0/1 centre of block, 2 + s star s, -2 copy */
  for (size_t i = 0; i < n; i++)
    kind[i] = -1;
  for (size_t c = 0; c < n_centres; c++) {
    rows.centres[c] = (n / 3) * (c + 1) + 1;
    kind[rows.centres[c]] = (int)c;
  }
  for (size_t s = 0; s < stars; s++) {
    size_t i = (s * 7919 + 3) % n;
    while (kind[i] != -1)
      i = (i + 1) % n;
    kind[i] = 2 + (int)s;
  }
  size_t placed = 0;
  for (size_t i = 0; i < n && placed < copies; i++)
    if (kind[i] == -1 && i % 3 == 2) {
      kind[i] = -2;
      placed++;
    }
  float *last_star = NULL;
  for (size_t i = 0; i < n; i++) {
    float *row = rows.m->values + i * d;
    memset(row, 0, d * sizeof(float));
    if (kind[i] == -1) {
      for (size_t j = 0; j < d; j++)
        row[j] =
            (float)(j >= 12 ? g_rand_double_range(rng, 5, 10) : g_rand_double_range(rng, 0, 0.3));
    } else if (kind[i] == 0 || kind[i] == 1) {
      for (size_t j = 0; j < 6; j++)
        row[6 * (size_t)kind[i] + j] = 1.0f;
    } else if (kind[i] >= 2) {
      const size_t s = (size_t)kind[i] - 2;
      tie_rows_star(row, s / 30, s % 30);
      last_star = row;
    }
  }
  /* copies: of the star seen last before them, else of the first star */
  for (size_t i = 0; i < n; i++)
    if (kind[i] == -2) {
      const float *from = last_star;
      for (size_t j = i; j-- > 0;)
        if (kind[j] >= 2) {
          from = rows.m->values + j * d;
          break;
        }
      memcpy(rows.m->values + i * d, from, d * sizeof(float));
    }
  g_free(kind);
  return rows;
}

/* The exact list of query row i against every reference row by knnwb_prepared_distance, sorted by
 * (distance, index): what the engine must give bit for bit. */
static void brute_force_row(const KnnwbPrepared *q, size_t i, const KnnwbPrepared *r, gboolean self,
                            size_t k, int64_t *index, double *distance)
{
  for (size_t s = 0; s < k; s++) {
    index[s] = -1;
    distance[s] = INFINITY;
  }
  for (size_t j = 0; j < r->n; j++) {
    if ((self && j == i) || (r->invalid != NULL && r->invalid[j]))
      continue;
    const double dj = knnwb_prepared_distance(q, i, r, j);
    if (!(dj < distance[k - 1]) && !(dj == distance[k - 1] && (int64_t)j < index[k - 1]))
      continue;
    size_t s = k - 1;
    while (s > 0 &&
           (distance[s - 1] > dj || (distance[s - 1] == dj && index[s - 1] > (int64_t)j))) {
      distance[s] = distance[s - 1];
      index[s] = index[s - 1];
      s--;
    }
    distance[s] = dj;
    index[s] = (int64_t)j;
  }
}

/* Every list of nb bit for bit the brute force; returns how many lists cut through exact ties
 * (their k-th distance shared by a row left out). */
static size_t assert_brute_force(const KnnwbMatrix *m, const KnnwbMatrix *reference,
                                 KnnwbMetric metric, const KnnwbNeighbors *nb)
{
  g_autoptr(GError) error = NULL;
  KnnwbPrepared r, q;
  const KnnwbMatrix *ref = reference ? reference : m;
  g_assert_true(knnwb_prepared_init(&r, ref, metric, FALSE, "reference", 1, NULL, NULL, &error));
  if (reference != NULL)
    g_assert_true(knnwb_prepared_init(&q, m, metric, FALSE, "query", 1, &r, NULL, &error));
  g_assert_no_error(error);
  const KnnwbPrepared *query = reference ? &q : &r;
  const size_t k = nb->k;
  int64_t *index = g_new(int64_t, k + 1);
  double *distance = g_new(double, k + 1);
  size_t cut = 0;
  for (size_t i = 0; i < m->n_rows; i++) {
    brute_force_row(query, i, &r, reference == NULL, k + 1, index, distance);
    g_assert_cmpmem(nb->indices + i * k, k * sizeof(int64_t), index, k * sizeof(int64_t));
    g_assert_cmpmem(nb->distances + i * k, k * sizeof(double), distance, k * sizeof(double));
    cut += index[k] >= 0 && distance[k] == distance[k - 1];
  }
  g_free(index);
  g_free(distance);
  if (reference != NULL)
    knnwb_prepared_clear(&q);
  knnwb_prepared_clear(&r);
  return cut;
}

static void assert_same_bytes(const KnnwbNeighbors *a, const KnnwbNeighbors *b)
{
  g_assert_cmpuint(a->n_queries, ==, b->n_queries);
  const size_t cells = a->n_queries * a->k;
  g_assert_cmpmem(a->indices, cells * sizeof(int64_t), b->indices, cells * sizeof(int64_t));
  g_assert_cmpmem(a->distances, cells * sizeof(double), b->distances, cells * sizeof(double));
}

/* Searches that took a small round (check_case). */
static size_t cases_small;

/* One search with small rounds against one with every round screened: where the data needed more
 * rounds, the path taken (a small round; the reference rows in slices exactly when its rows are
 * fewer than 4 a thread), then the lists: the screened rounds' bytes, the brute force's and the
 * oracle's. Returns the lists cut through exact ties. */
static size_t check_case(const KnnwbMatrix *m, const KnnwbMatrix *reference, KnnwbMetric metric,
                         size_t k, int threads, gboolean expect_slices)
{
  if (g_test_verbose())
    g_printerr("%s %s n=%zu k=%zu threads=%d\n", knnwb_metric_to_string(metric),
               reference ? "query" : "self", reference ? reference->n_rows : m->n_rows, k, threads);
  g_autoptr(KnnwbNeighbors) rounds = search(m, reference, metric, k, threads, TRUE);
  g_assert_false(small_round);
  const gboolean needed = rounds->n_reselected > 0;
  g_autoptr(KnnwbNeighbors) small = search(m, reference, metric, k, threads, FALSE);
  g_assert_cmpint(small_round, ==, needed);
  if (needed) {
    cases_small++;
    g_assert_false(screened); /* no screened round after the first */
    g_assert_cmpuint(small->n_exhaustive, >, 0);
    if (threads > 1 && small_rows_seen < 4 * (size_t)threads)
      g_assert_cmpuint(slices_used, >=, (size_t)MIN(threads, 3));
    else
      g_assert_cmpuint(slices_used, ==, 0);
    if (expect_slices)
      g_assert_cmpuint(slices_used, >, 0);
  }
  assert_same_bytes(small, rounds);
  const KnnwbMatrix *ref = reference ? reference : m;
  oracle_check(metric, m->values, m->n_rows, ref->values, ref->n_rows, m->n_cols, reference == NULL,
               small, 1e-9);
  return assert_brute_force(m, reference, metric, small);
}

/* Self jobs: the centres (each with 30 stars tied at its k-th) are the few rows left; every metric,
 * odd sizes, k = 1 and 10 (the 10 of 30 ties by lower index, spread over the slices), 1 thread
 * (a row at a time) and 3 and 4 threads (the reference rows in slices). */
static void test_self(void)
{
  cases_small = 0;
  const size_t noise[] = {234, 1032};
  const size_t ks[] = {1, 10};
  const int threads[] = {1, 3, 4};
  for (size_t mi = 0; mi < G_N_ELEMENTS(metrics); mi++)
    for (size_t ni = 0; ni < G_N_ELEMENTS(noise); ni++) {
      TieRows rows = tie_rows_new(noise[ni], 2, 5, (guint32)(mi * 10 + ni));
      for (size_t ki = 0; ki < G_N_ELEMENTS(ks); ki++)
        for (size_t ti = 0; ti < G_N_ELEMENTS(threads); ti++) {
          check_case(rows.m, NULL, metrics[mi], ks[ki], threads[ti], FALSE);
        }
      knnwb_matrix_free(rows.m);
    }
  /* the rounds this test is about: most cases need them */
  g_printerr("# %zu of 48 searches took a small round\n", cases_small);
  g_assert_cmpuint(cases_small, >=, 44);
}

/* Query jobs of a few rows (the centres and a noise row) against the stars and noise: the small
 * round's rows are fewer than the threads' share, so with 3 and 4 threads the reference rows are
 * split in slices. Exact ties cut at k must come out by lower index: a merge of the slices that
 * broke ties otherwise (by slice, or by higher index) fails here. */
static void test_query_slices(void)
{
  cases_small = 0;
  const size_t noise[] = {300, 1102};
  const size_t ks[] = {1, 10, 37};
  const int threads[] = {1, 3, 4};
  size_t cut = 0;
  for (size_t mi = 0; mi < G_N_ELEMENTS(metrics); mi++)
    for (size_t ni = 0; ni < G_N_ELEMENTS(noise); ni++) {
      TieRows rows = tie_rows_new(noise[ni], 2, 7, (guint32)(100 + mi * 10 + ni));
      g_autoptr(KnnwbMatrix) query = knnwb_matrix_new(3, 18, NULL);
      memcpy(query->values, rows.m->values + rows.centres[0] * 18, 18 * sizeof(float));
      memcpy(query->values + 18, rows.m->values + rows.centres[1] * 18, 18 * sizeof(float));
      memcpy(query->values + 36, rows.m->values, 18 * sizeof(float)); /* row 0: noise */
      query->values[36] += 0.01f;
      /* the reference: every row but the centres (a query row's own copy would be its nearest) */
      const size_t n = rows.m->n_rows;
      g_autoptr(KnnwbMatrix) reference = knnwb_matrix_new(n - 2, 18, NULL);
      for (size_t i = 0, to = 0; i < n; i++)
        if (i != rows.centres[0] && i != rows.centres[1])
          memcpy(reference->values + 18 * to++, rows.m->values + 18 * i, 18 * sizeof(float));
      for (size_t ki = 0; ki < G_N_ELEMENTS(ks); ki++)
        for (size_t ti = 0; ti < G_N_ELEMENTS(threads); ti++)
          cut += check_case(query, reference, metrics[mi], ks[ki], threads[ti], threads[ti] > 1);
      knnwb_matrix_free(rows.m);
    }
  g_printerr("# %zu of 72 searches took a small round, %zu lists cut through exact ties\n",
             cases_small, cut);
  g_assert_cmpuint(cases_small, >=, 60);
  /* the ties this test is about: lists whose k-th distance a row left out shares */
  g_assert_cmpuint(cut, >, 0);
}

/* knnwb_exhaustive_run itself: a few rows against odd numbers of reference rows, some flagged
 * invalid (as dropped rows are), k past the valid rows (padding), with and without a row left
 * out, on 1 to 4 threads (slices or a row per thread): each list the bytes of
 * knnwb_refine_row_exhaustive. A raised cancel flag stops it (FALSE). */
static void test_exhaustive_run(void)
{
  const size_t sizes[] = {65, 131, 403};
  for (size_t si = 0; si < G_N_ELEMENTS(sizes); si++) {
    const size_t n = sizes[si], d = 7;
    g_autoptr(KnnwbMatrix) m = knnwb_matrix_new(n, d, NULL);
    g_autoptr(GRand) rng = g_rand_new_with_seed((guint32)n);
    for (size_t i = 0; i < n; i++)
      for (size_t j = 0; j < d; j++) /* small integers: many exact ties */
        m->values[i * d + j] = (float)g_rand_int_range(rng, 0, 3) + (j == i % d ? 5.0f : 0.0f);
    g_autoptr(GError) error = NULL;
    KnnwbPrepared p;
    g_assert_true(
        knnwb_prepared_init(&p, m, KNNWB_METRIC_EUCLIDEAN, FALSE, "data", 1, NULL, NULL, &error));
    g_assert_no_error(error);
    /* every 9th row left out, as missing values or degenerate rows are */
    g_assert_null(p.invalid);
    p.invalid = g_malloc0(n);
    for (size_t i = 4; i < n; i += 9, p.n_invalid++)
      p.invalid[i] = 1;
    const int64_t rows[] = {3, 0, (int64_t)n - 1, (int64_t)n / 2, 13};
    const int64_t self_index[] = {3, -1, (int64_t)n - 1, 0, 13};
    const size_t ks[] = {1, 6, n};
    for (size_t ki = 0; ki < G_N_ELEMENTS(ks); ki++)
      for (int threads = 1; threads <= 4; threads++)
        for (int self = 0; self < 2; self++) {
          const size_t k = ks[ki], n_rows = G_N_ELEMENTS(rows);
          int64_t *index = g_new(int64_t, n * k), *expect_index = g_new(int64_t, k);
          double *distance = g_new(double, n *k), *expect_distance = g_new(double, k);
          KnnwbExhaustiveJob job = {.query = &p,
                                    .reference = &p,
                                    .rows = rows,
                                    .self_index = self ? self_index : NULL,
                                    .n_rows = n_rows,
                                    .k = k,
                                    .out_index = index,
                                    .out_distance = distance,
                                    .threads = threads};
          g_assert_true(knnwb_exhaustive_run(&job));
          for (size_t t = 0; t < n_rows; t++) {
            const size_t i = (size_t)rows[t];
            if (p.invalid[i])
              continue;
            knnwb_refine_row_exhaustive(&p, i, &p, self ? self_index[t] : -1, k, NULL, expect_index,
                                        expect_distance);
            g_assert_cmpmem(index + i * k, k * sizeof(int64_t), expect_index, k * sizeof(int64_t));
            g_assert_cmpmem(distance + i * k, k * sizeof(double), expect_distance,
                            k * sizeof(double));
          }
          if (threads > 1 && n >= 128) /* the reference rows in slices here */
            g_assert_cmpuint(knnwb_exhaustive_slices(n_rows, n, k, threads), >, 1);
          volatile gint cancel = 1;
          job.cancel = &cancel;
          g_assert_false(knnwb_exhaustive_run(&job));
          g_free(index);
          g_free(distance);
          g_free(expect_index);
          g_free(expect_distance);
        }
    knnwb_prepared_clear(&p);
  }
}

/* Which rounds count as small: on a GPU a row against 1.5 million rows of 128 (a screened round
 * there costs 0.1 s of fixed work), on the CPU, whose screened rounds have no such cost, only what
 * costs about as much as one (a few rows against 100,000; not 267 rows against 50,001 x 64, which
 * the CPU re-selected 6 times faster); never without the columns or with the limit set to 0. */
static void test_limit(void)
{
  g_unsetenv("KNNWB_CERTIFY_SMALL_WORK");
  g_assert_true(knnwb_certify_small(1, 1533876, 128, FALSE));
  g_assert_true(knnwb_certify_small(26, 1533876, 128, FALSE));
  g_assert_false(knnwb_certify_small(1000, 1533876, 128, FALSE));
  g_assert_false(knnwb_certify_small(1, 1533876, 128, TRUE));
  g_assert_true(knnwb_certify_small(2, 100001, 64, TRUE));
  g_assert_false(knnwb_certify_small(267, 50001, 64, TRUE));
  g_assert_false(knnwb_certify_small(1, 10, 0, FALSE));
  g_setenv("KNNWB_CERTIFY_SMALL_WORK", "0", TRUE);
  g_assert_false(knnwb_certify_small(1, 10, 4, FALSE));
  g_unsetenv("KNNWB_CERTIFY_SMALL_WORK");
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_log_set_default_handler(capture, NULL);
  g_test_add_func("/certify/small/limit", test_limit);
  g_test_add_func("/certify/small/exhaustive-run", test_exhaustive_run);
  g_test_add_func("/certify/small/self", test_self);
  g_test_add_func("/certify/small/query-slices", test_query_slices);
  return g_test_run();
}
