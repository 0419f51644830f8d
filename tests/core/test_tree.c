/* core/tree/: the k-d tree search of rows of a few columns gives the bytes of the tile search
 * (KNNWB_TREE=0) and the double brute-force oracle's lists, on odd sizes, ties (a grid, copies),
 * large magnitudes, absent rows and both metrics it takes, for self graphs and query rows; it says
 * when it applies, stops when cancelled, reports its progress, and leaves rows that are not finite
 * to the tile search's message. */
#include <math.h>
#include <string.h>
#include <glib.h>
#include <knnwb/error.h>
#include <knnwb/knn.h>
#include <knnwb/matrix.h>
#include "oracle.h"
#include "tree/tree.h"
#include "knnwb_test_lists.h"
#include "knnwb_test_progress.h"
#include "outside_search.h"

static KnnwbMatrix *random_rows(size_t n, size_t d, guint32 seed, double scale)
{
  KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
  GRand *rand = g_rand_new_with_seed(seed);
  for (size_t i = 0; i < n * d; i++)
    m->values[i] = (float)(scale * (g_rand_double(rand) - 0.5));
  g_rand_free(rand);
  for (size_t i = 3; i < n && i < 9; i++) /* copies of row 1 */
    memcpy(m->values + i * d, m->values + d, d * sizeof(float));
  return m;
}

/* A grid of w columns of points, spacing 1, every point's neighbours at tied distances. */
static KnnwbMatrix *grid_rows(size_t n, size_t w)
{
  KnnwbMatrix *m = knnwb_matrix_new(n, 2, NULL);
  for (size_t i = 0; i < n; i++) {
    m->values[2 * i] = (float)(i % w);
    m->values[2 * i + 1] = (float)(i / w);
  }
  return m;
}

/* The lists of queries against data (queries NULL: data's self graph) on the CPU, KNNWB_TREE as
 * tree says. */
static KnnwbNeighbors *lists_of(const KnnwbMatrix *queries, const KnnwbMatrix *data,
                                KnnwbMetric metric, size_t k, const char *tree, int threads)
{
  g_setenv("KNNWB_TREE", tree, TRUE);
  KnnwbKnnOptions o;
  knnwb_knn_options_init(&o);
  o.metric = metric;
  o.k = k;
  o.backend = KNNWB_BACKEND_CPU;
  o.n_threads = threads;
  KnnwbNeighbors *nb = NULL;
  GError *error = NULL;
  const gboolean ok = queries != NULL ? knnwb_knn_query(queries, data, &o, &nb, &error)
                                      : knnwb_knn_self(data, &o, &nb, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
  g_unsetenv("KNNWB_TREE");
  return nb;
}

static KnnwbNeighbors *search(const KnnwbMatrix *m, KnnwbMetric metric, size_t k, const char *tree,
                              int threads)
{
  return lists_of(NULL, m, metric, k, tree, threads);
}

/* The tree's lists on 1 and 3 threads, the tile search's and the oracle's, for one input. */
static void check_rows(const KnnwbMatrix *m, KnnwbMetric metric, size_t k)
{
  KnnwbNeighbors *tree = search(m, metric, k, "1", 1);
  KnnwbNeighbors *threads = search(m, metric, k, "1", 3);
  KnnwbNeighbors *tiles = search(m, metric, k, "0", 2);
  knnwb_test_assert_same_lists(tree, tiles);
  knnwb_test_assert_same_lists(threads, tiles);
  const size_t d = m->n_cols;
  double scale = 0.0;
  for (size_t i = 0; i < m->n_rows * d; i++)
    scale = MAX(scale, fabs((double)m->values[i]));
  oracle_check(metric, m->values, m->n_rows, m->values, m->n_rows, d, TRUE, tree,
               1e-12 * MAX(scale, 1.0) * (double)d);
  knnwb_neighbors_free(tree);
  knnwb_neighbors_free(threads);
  knnwb_neighbors_free(tiles);
}

static void test_odd_sizes(void)
{
  const size_t sizes[] = {2, 3, 17, 18, 33, 101, 1027};
  const size_t columns[] = {1, 2, 3, 5, 8};
  const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_MANHATTAN};
  for (size_t s = 0; s < G_N_ELEMENTS(sizes); s++)
    for (size_t c = 0; c < G_N_ELEMENTS(columns); c++)
      for (size_t t = 0; t < G_N_ELEMENTS(metrics); t++) {
        const size_t n = sizes[s];
        KnnwbMatrix *m = random_rows(n, columns[c], (guint32)(n * 31 + c), 10.0);
        check_rows(m, metrics[t], 1);
        check_rows(m, metrics[t], MIN((size_t)7, n - 1));
        check_rows(m, metrics[t], n - 1);
        knnwb_matrix_free(m);
      }
}

static void test_ties(void)
{
  KnnwbMatrix *grid = grid_rows(2000, 37); /* (a last row short of its 37 points) */
  for (size_t k = 1; k <= 21; k += 4) {
    check_rows(grid, KNNWB_METRIC_EUCLIDEAN, k);
    check_rows(grid, KNNWB_METRIC_MANHATTAN, k);
  }
  knnwb_matrix_free(grid);
  KnnwbMatrix *same = knnwb_matrix_new(301, 3, NULL); /* every row the same */
  for (size_t i = 0; i < same->n_rows * 3; i++)
    same->values[i] = 0.25f;
  check_rows(same, KNNWB_METRIC_EUCLIDEAN, 300);
  check_rows(same, KNNWB_METRIC_MANHATTAN, 13);
  knnwb_matrix_free(same);
  /* Many copies of two rows among others: every other row's k-th among copies tied at one
   * distance, above 0 (nodes of copies entered only below the k-th's row), self and queries. */
  KnnwbMatrix *copies = random_rows(701, 3, 17, 10.0);
  for (size_t i = 50; i < 701; i++)
    memcpy(copies->values + i * 3, copies->values + (i % 2 ? 11 : 12) * 3, 3 * sizeof(float));
  KnnwbMatrix *queries = random_rows(97, 3, 18, 10.0);
  const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_MANHATTAN};
  for (size_t t = 0; t < G_N_ELEMENTS(metrics); t++)
    for (size_t k = 1; k <= 400; k *= 7) {
      check_rows(copies, metrics[t], k);
      KnnwbNeighbors *tiles = lists_of(queries, copies, metrics[t], k, "0", 2);
      KnnwbNeighbors *tree = lists_of(queries, copies, metrics[t], k, "1", 3);
      knnwb_test_assert_same_lists(tree, tiles);
      knnwb_neighbors_free(tiles);
      knnwb_neighbors_free(tree);
    }
  knnwb_matrix_free(copies);
  knnwb_matrix_free(queries);
}

/* Absent rows (kept only for their numbers: rows with missing values as read, their values zeros)
 * get no list and are nobody's neighbour, as in the tile search: many of them, all rows but a few
 * (fewer than k left), all but one. */
static void check_absent(size_t n, size_t d, size_t every, size_t keep, size_t k)
{
  KnnwbMatrix *m = random_rows(n, d, (guint32)(n + every), 10.0);
  for (size_t i = 0; i < n; i++)
    if ((every > 0 && i % every == 0) || (keep > 0 && i >= keep)) {
      memset(m->values + i * d, 0, d * sizeof(float));
      knnwb_matrix_set_row_absent(m, i);
    }
  const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_MANHATTAN};
  for (size_t t = 0; t < G_N_ELEMENTS(metrics); t++) {
    KnnwbNeighbors *tiles = search(m, metrics[t], k, "0", 2);
    for (int threads = 1; threads <= 3; threads += 2) {
      KnnwbNeighbors *tree = search(m, metrics[t], k, "1", threads);
      knnwb_test_assert_same_lists(tree, tiles);
      for (size_t i = 0; i < n; i++) {
        if (knnwb_matrix_row_is_absent(m, i))
          g_assert_cmpint(tree->n_found[i], ==, 0);
        for (size_t slot = 0; slot < (size_t)tree->n_found[i]; slot++)
          g_assert_false(knnwb_matrix_row_is_absent(m, (size_t)tree->indices[i * k + slot]));
      }
      knnwb_neighbors_free(tree);
    }
    knnwb_neighbors_free(tiles);
  }
  knnwb_matrix_free(m);
}

static void test_absent_rows(void)
{
  check_absent(1027, 2, 5, 0, 7); /* every fifth row, row 0 among them */
  check_absent(333, 3, 0, 8, 7);  /* 8 rows left, k = 7: every other one */
  check_absent(40, 1, 0, 40, 39); /* none absent, k = n - 1 */
  /* Fewer rows left than k + 1: refused with the tile search's words; none left: empty lists. */
  const char *refusal = "k = 7 but each row has only 3 other rows to choose neighbours from (329 "
                        "of the 333 rows are absent";
  for (int tree = 0; tree <= 1; tree++) {
    KnnwbMatrix *m = random_rows(333, 3, 4, 10.0);
    for (size_t i = 4; i < 333; i++)
      knnwb_matrix_set_row_absent(m, i);
    memset(m->values + 4 * 3, 0, 329 * 3 * sizeof(float));
    g_setenv("KNNWB_TREE", tree ? "1" : "0", TRUE);
    KnnwbKnnOptions o;
    knnwb_knn_options_init(&o);
    o.metric = KNNWB_METRIC_EUCLIDEAN;
    o.k = 7;
    o.backend = KNNWB_BACKEND_CPU;
    KnnwbNeighbors *nb = NULL;
    GError *error = NULL;
    g_assert_false(knnwb_knn_self(m, &o, &nb, &error));
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
    g_assert_true(g_str_has_prefix(error->message, refusal));
    g_clear_error(&error);
    for (size_t i = 0; i < 4; i++)
      knnwb_matrix_set_row_absent(m, i);
    g_assert_true(knnwb_knn_self(m, &o, &nb, &error));
    g_assert_no_error(error);
    for (size_t i = 0; i < 333; i++)
      g_assert_cmpint(nb->n_found[i], ==, 0);
    knnwb_neighbors_free(nb);
    knnwb_matrix_free(m);
  }
  g_unsetenv("KNNWB_TREE");
}

/* Query rows against reference rows: the tree (1 and 3 threads, named in the lists) gives the
 * tile search's bytes and the oracle's lists, on odd sizes, k up to every reference row, queries
 * that are reference rows (distance 0, and copies among them), every metric. */
static void test_queries(void)
{
  const size_t sizes[][2] = {{1, 2}, {17, 33}, {1027, 101}, {300, 1027}};
  const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_MANHATTAN,
                                 KNNWB_METRIC_PEARSON,   KNNWB_METRIC_ABS_PEARSON,
                                 KNNWB_METRIC_SPEARMAN,  KNNWB_METRIC_COSINE};
  for (size_t c = 0; c < G_N_ELEMENTS(sizes); c++)
    for (size_t t = 0; t < G_N_ELEMENTS(metrics); t++) {
      const size_t nq = sizes[c][0], n = sizes[c][1], d = 2 + c % 3;
      KnnwbMatrix *data = random_rows(n, d, (guint32)(n + 5 * c), 10.0);
      KnnwbMatrix *queries = random_rows(nq, d, (guint32)(nq + 7 * c), 10.0);
      for (size_t i = 0; i < nq; i += 3) /* every third query is a reference row */
        memcpy(queries->values + i * d, data->values + (i % n) * d, d * sizeof(float));
      const size_t ks[] = {1, MIN((size_t)7, n), n};
      for (size_t kk = 0; kk < G_N_ELEMENTS(ks) - (n * nq > 10000); kk++) { /* (k = n: small) */
        KnnwbNeighbors *tiles = lists_of(queries, data, metrics[t], ks[kk], "0", 2);
        for (int threads = 1; threads <= 3; threads += 2) {
          KnnwbNeighbors *tree = lists_of(queries, data, metrics[t], ks[kk], "1", threads);
          g_assert_cmpstr(tree->backend_used, ==, "cpu (k-d tree)");
          knnwb_test_assert_same_lists(tree, tiles);
          oracle_check(metrics[t], queries->values, nq, data->values, n, d, FALSE, tree, 1e-9);
          knnwb_neighbors_free(tree);
        }
        knnwb_neighbors_free(tiles);
      }
      knnwb_matrix_free(data);
      knnwb_matrix_free(queries);
    }
}

/* Query runs with rows absent as read: absent queries get no list, absent reference rows are no
 * one's neighbour; k above the reference rows left is refused with the tile search's words. */
static void test_queries_absent(void)
{
  KnnwbMatrix *data = random_rows(500, 2, 21, 10.0);
  KnnwbMatrix *queries = random_rows(203, 2, 22, 10.0);
  for (size_t i = 0; i < 500; i += 4) {
    memset(data->values + i * 2, 0, 2 * sizeof(float));
    knnwb_matrix_set_row_absent(data, i);
  }
  for (size_t i = 1; i < 203; i += 10) {
    memset(queries->values + i * 2, 0, 2 * sizeof(float));
    knnwb_matrix_set_row_absent(queries, i);
  }
  KnnwbNeighbors *tiles = lists_of(queries, data, KNNWB_METRIC_EUCLIDEAN, 9, "0", 2);
  KnnwbNeighbors *tree = lists_of(queries, data, KNNWB_METRIC_EUCLIDEAN, 9, "1", 3);
  knnwb_test_assert_same_lists(tree, tiles);
  g_assert_cmpint(tree->n_found[1], ==, 0);
  for (size_t i = 0; i < 203 * 9; i++)
    g_assert_true(tree->indices[i] < 0 || !knnwb_matrix_row_is_absent(data, tree->indices[i]));
  knnwb_neighbors_free(tiles);
  knnwb_neighbors_free(tree);
  for (int way = 0; way <= 1; way++) {
    g_setenv("KNNWB_TREE", way ? "1" : "0", TRUE);
    KnnwbKnnOptions o;
    knnwb_knn_options_init(&o);
    o.metric = KNNWB_METRIC_MANHATTAN;
    o.k = 376; /* (375 reference rows left) */
    o.backend = KNNWB_BACKEND_CPU;
    KnnwbNeighbors *nb = NULL;
    GError *error = NULL;
    g_assert_false(knnwb_knn_query(queries, data, &o, &nb, &error));
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
    g_assert_true(g_str_has_prefix(error->message, "k = 376 but each row has only 375 reference"));
    g_clear_error(&error);
  }
  g_unsetenv("KNNWB_TREE");
  knnwb_matrix_free(data);
  knnwb_matrix_free(queries);
}

/* The angular metrics (the pearson family, spearman, cosine; rows of 2 to 8 columns, odd sizes):
 * the tree of the scored rows gives the tile search's bytes and the oracle's lists; with rows that
 * are shifted and scaled copies of another (correlation 1: distance 0, tied), rows of small
 * integers (spearman's tied ranks), and a row that is constant (a zero row for cosine) dropped with
 * drop_degenerate. */
static void check_angular(size_t n, size_t d, size_t k, gboolean integers)
{
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_PEARSON, KNNWB_METRIC_ABS_PEARSON,
                                        KNNWB_METRIC_SPEARMAN, KNNWB_METRIC_COSINE};
  KnnwbMatrix *m = random_rows(n, d, (guint32)(n * 7 + d), 10.0);
  for (size_t i = 0; i < n * d && integers; i++)
    m->values[i] = floorf(m->values[i] / 4.0f);
  for (size_t i = 0; i < n; i++) { /* (no constant row: the pearson family refuses them) */
    gboolean constant = TRUE;
    for (size_t j = 1; j < d; j++)
      constant = constant && m->values[i * d + j] == m->values[i * d];
    if (constant)
      m->values[i * d] += 1.0f;
  }
  for (size_t i = 10; i < n && i < 14; i++) /* 2 x row 2 + 3: correlation 1 */
    for (size_t j = 0; j < d; j++)
      m->values[i * d + j] = 2.0f * m->values[2 * d + j] + 3.0f;
  for (size_t t = 0; t < G_N_ELEMENTS(metrics); t++) {
    KnnwbNeighbors *tiles = search(m, metrics[t], k, "0", 2);
    for (int threads = 1; threads <= 3; threads += 2) {
      KnnwbNeighbors *tree = search(m, metrics[t], k, "1", threads);
      g_assert_cmpstr(tree->backend_used, ==, "cpu (k-d tree)");
      knnwb_test_assert_same_lists(tree, tiles);
      knnwb_neighbors_free(tree);
    }
    oracle_check(metrics[t], m->values, n, m->values, n, d, TRUE, tiles, 1e-9);
    knnwb_neighbors_free(tiles);
  }
  knnwb_matrix_free(m);
}

static void test_angular(void)
{
  const size_t sizes[] = {5, 18, 101};
  for (size_t s = 0; s < G_N_ELEMENTS(sizes); s++)
    for (size_t d = 2; d <= 8; d += 3) {
      check_angular(sizes[s], d, 1, FALSE);
      check_angular(sizes[s], d, MIN((size_t)7, sizes[s] - 1), d > 2);
      check_angular(sizes[s], d, sizes[s] - 1, FALSE);
    }
  check_angular(1027, 3, 7, TRUE); /* (a deeper tree) */
}

/* A constant row under pearson (a zero row under cosine): refused with the tile search's words,
 * or, with drop_degenerate, left out as the tile search leaves it. */
static void test_angular_degenerate(void)
{
  const KnnwbMetric metrics[] = {KNNWB_METRIC_PEARSON, KNNWB_METRIC_COSINE};
  for (size_t t = 0; t < G_N_ELEMENTS(metrics); t++) {
    KnnwbMatrix *m = random_rows(301, 4, 13, 10.0);
    for (size_t j = 0; j < 4; j++)
      m->values[40 * 4 + j] = metrics[t] == KNNWB_METRIC_COSINE ? 0.0f : 1.5f;
    char *messages[2];
    KnnwbNeighbors *lists[2];
    for (int tree = 0; tree <= 1; tree++) {
      g_setenv("KNNWB_TREE", tree ? "1" : "0", TRUE);
      KnnwbKnnOptions o;
      knnwb_knn_options_init(&o);
      o.metric = metrics[t];
      o.k = 5;
      o.backend = KNNWB_BACKEND_CPU;
      GError *error = NULL;
      KnnwbNeighbors *nb = NULL;
      g_assert_false(knnwb_knn_self(m, &o, &nb, &error));
      g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA);
      messages[tree] = g_strdup(error->message);
      g_clear_error(&error);
      o.drop_degenerate = TRUE;
      g_test_expect_message(G_LOG_DOMAIN, G_LOG_LEVEL_WARNING, "*left out*");
      g_assert_true(knnwb_knn_self(m, &o, &lists[tree], &error));
      g_test_assert_expected_messages();
      g_assert_no_error(error);
    }
    g_unsetenv("KNNWB_TREE");
    g_assert_cmpstr(messages[0], ==, messages[1]);
    g_assert_cmpstr(lists[1]->backend_used, ==, "cpu (k-d tree)");
    knnwb_test_assert_same_lists(lists[1], lists[0]);
    g_assert_cmpint(lists[1]->n_found[40], ==, 0);
    for (int tree = 0; tree <= 1; tree++) {
      g_free(messages[tree]);
      knnwb_neighbors_free(lists[tree]);
    }
    knnwb_matrix_free(m);
  }
}

static void test_magnitudes(void)
{
  KnnwbMatrix *big = random_rows(777, 3, 5, 6e38); /* (near FLT_MAX: squares in double) */
  check_rows(big, KNNWB_METRIC_EUCLIDEAN, 9);
  check_rows(big, KNNWB_METRIC_MANHATTAN, 9);
  knnwb_matrix_free(big);
  KnnwbMatrix *small = random_rows(777, 2, 6, 1e-38); /* (subnormal floats) */
  check_rows(small, KNNWB_METRIC_EUCLIDEAN, 9);
  knnwb_matrix_free(small);
}

static void test_applies(void)
{
  KnnwbMatrix *m = random_rows(KNNWB_TREE_MIN_ROWS, 3, 1, 1.0);
  KnnwbMatrix *wide = random_rows(KNNWB_TREE_MIN_ROWS, KNNWB_TREE_MAX_COLUMNS + 1, 1, 1.0);
  KnnwbKnnOptions o;
  knnwb_knn_options_init(&o);
  o.metric = KNNWB_METRIC_EUCLIDEAN;
  o.backend = KNNWB_BACKEND_CPU;
  o.k = 10;
  g_unsetenv("KNNWB_TREE");
  g_assert_true(knnwb_tree_applies(m, &o));
  g_assert_false(knnwb_tree_applies(wide, &o));
  o.metric = KNNWB_METRIC_MANHATTAN;
  g_assert_true(knnwb_tree_applies(m, &o));
  o.metric = KNNWB_METRIC_PEARSON; /* (the angular metrics, alone and over ranks) */
  g_assert_true(knnwb_tree_applies(m, &o));
  KnnwbKnnGroup group = {.rank = 0, .size = 2, .local_size = 2};
  o.group = &group;
  g_assert_true(knnwb_tree_applies(m, &o));
  o.metric = KNNWB_METRIC_EUCLIDEAN; /* ranks holding every row; split ranks put theirs together */
  g_assert_true(knnwb_tree_applies(m, &o));
  o.group_split = TRUE;
  g_assert_false(knnwb_tree_applies(m, &o));
  g_assert_true(knnwb_tree_applies_shape(m->n_rows, 3, &o));
  o.group = NULL;
  o.group_split = FALSE;
  o.k = m->n_rows; /* (more than the other rows: the request checks say so) */
  g_assert_false(knnwb_tree_applies(m, &o));
  o.k = 10;
  g_setenv("KNNWB_TREE", "0", TRUE);
  g_assert_false(knnwb_tree_applies(m, &o));
  KnnwbMatrix *few = random_rows(KNNWB_TREE_MIN_ROWS - 1, 3, 1, 1.0);
  g_unsetenv("KNNWB_TREE");
  g_assert_false(knnwb_tree_applies(few, &o));
  g_setenv("KNNWB_TREE", "1", TRUE);
  g_assert_true(knnwb_tree_applies(few, &o));
  g_unsetenv("KNNWB_TREE");
  /* Query runs: enough query rows, as many columns, k up to every reference row. */
  KnnwbMatrix *queries = random_rows(KNNWB_TREE_MIN_QUERIES, 3, 2, 1.0);
  KnnwbMatrix *queries_few = random_rows(KNNWB_TREE_MIN_QUERIES - 1, 3, 2, 1.0);
  KnnwbMatrix *queries_wide = random_rows(KNNWB_TREE_MIN_QUERIES, 4, 2, 1.0);
  g_assert_true(knnwb_tree_applies_query(queries, m, &o));
  g_assert_false(knnwb_tree_applies_query(queries_few, m, &o));
  g_assert_false(knnwb_tree_applies_query(queries_wide, m, &o));
  g_assert_false(knnwb_tree_applies_query(queries, few, &o));
  o.k = m->n_rows;
  g_assert_true(knnwb_tree_applies_query(queries, m, &o));
  o.k = m->n_rows + 1;
  g_assert_false(knnwb_tree_applies_query(queries, m, &o));
  o.k = 10;
  g_setenv("KNNWB_TREE", "1", TRUE);
  g_assert_true(knnwb_tree_applies_query(queries_few, few, &o));
  g_unsetenv("KNNWB_TREE");
  knnwb_matrix_free(queries);
  knnwb_matrix_free(queries_few);
  knnwb_matrix_free(queries_wide);
  knnwb_matrix_free(m);
  knnwb_matrix_free(wide);
  knnwb_matrix_free(few);
}

/* A run the tree takes leaves the GPUs alone under the default backend (starting them cost a GPU
 * host's run of a million points more than its search): neither an NPY header's shape
 * (knnwb_knn_devices_prepare) nor the search begins their start, nor the nearest-outside search;
 * a shape of more columns does. First of the tests: a process starts its GPUs once. */
static void test_no_gpu_start(void)
{
  KnnwbKnnOptions o;
  knnwb_knn_options_init(&o);
  o.metric = KNNWB_METRIC_EUCLIDEAN;
  o.k = 5;
  o.n_threads = 1;
  g_assert_false(knnwb_knn_devices_begun());
  knnwb_knn_devices_prepare(&o, 50000, KNNWB_TREE_MAX_COLUMNS_GPU);
  g_assert_false(knnwb_knn_devices_begun());
  KnnwbMatrix *m = random_rows(KNNWB_TREE_MIN_ROWS + 1, KNNWB_TREE_MAX_COLUMNS_GPU, 5, 1.0);
  KnnwbNeighbors *lists = NULL;
  GError *error = NULL;
  g_assert_true(knnwb_knn_self(m, &o, &lists, &error));
  g_assert_no_error(error);
  g_assert_cmpstr(lists->backend_used, ==, "cpu (k-d tree)");
  KnnwbOutsideSearch *outside = knnwb_outside_search_new(m, &o, &error);
  g_assert_no_error(error);
  g_assert_false(knnwb_knn_devices_begun());
  knnwb_knn_devices_prepare(&o, 50000, 50);
  g_assert_true(knnwb_knn_devices_begun());
  knnwb_knn_devices_wait();
  knnwb_outside_search_free(outside);
  knnwb_neighbors_free(lists);
  knnwb_matrix_free(m);
}

/* The tree's progress, its first report held (knnwb_test_progress_held): the last rows are still
 * reported and no report goes back; then it stops when cancelled. */
static void test_progress_and_cancel(void)
{
  KnnwbMatrix *m = random_rows(5003, 2, 9, 1.0);
  KnnwbKnnOptions o;
  knnwb_knn_options_init(&o);
  o.metric = KNNWB_METRIC_EUCLIDEAN;
  o.k = 5;
  o.n_threads = 2;
  KnnwbTestProgress last = {0};
  o.progress = knnwb_test_progress_held;
  o.progress_data = &last;
  KnnwbNeighbors *nb = NULL;
  GError *error = NULL;
  g_assert_true(knnwb_tree_self(m, &o, &nb, &error));
  g_assert_no_error(error);
  g_assert_nonnull(nb);
  g_assert_cmpuint(last.total, ==, m->n_rows);
  g_assert_cmpuint(last.done, ==, m->n_rows); /* (the last rows are always reported) */
  knnwb_neighbors_free(nb);
  nb = NULL;
  volatile gint cancel = 1;
  o.cancel = &cancel;
  g_assert_false(knnwb_tree_self(m, &o, &nb, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
  g_assert_null(nb);
  g_clear_error(&error);
  knnwb_matrix_free(m);
  /* Rows enough for the build to poll: it stops before the search. */
  m = random_rows(3 * 65536, 2, 10, 1.0);
  g_assert_false(knnwb_tree_self(m, &o, &nb, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
  g_assert_nonnull(strstr(error->message, "building"));
  g_assert_null(nb);
  g_clear_error(&error);
  knnwb_matrix_free(m);
}

static void test_not_finite(void)
{
  KnnwbMatrix *m = random_rows(300, 2, 4, 1.0);
  m->values[2 * 123 + 1] = NAN;
  KnnwbKnnOptions o;
  knnwb_knn_options_init(&o);
  o.metric = KNNWB_METRIC_EUCLIDEAN;
  o.backend = KNNWB_BACKEND_CPU;
  o.k = 4;
  KnnwbNeighbors *nb = NULL;
  GError *error = NULL;
  g_assert_true(knnwb_tree_self(m, &o, &nb, &error)); /* (left to the tile search) */
  g_assert_null(nb);
  g_setenv("KNNWB_TREE", "1", TRUE);
  g_assert_false(knnwb_knn_self(m, &o, &nb, &error));
  g_unsetenv("KNNWB_TREE");
  g_assert_nonnull(error);
  g_assert_nonnull(strstr(error->message, "123")); /* the tile search's message names the row */
  g_clear_error(&error);
  knnwb_matrix_free(m);
}

/* The nearest row outside each row's group (the exact MST's question) through the tree: the tile
 * search's answers (KNNWB_TREE=0) and the brute force over the engine's exact distances, bit for
 * bit, ties to the lower row (copies of rows in other groups), under every metric and the groups
 * of outside_groups; a raised cancel stops a run. */
static void test_outside(void)
{
  static const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_MANHATTAN,
                                        KNNWB_METRIC_PEARSON,   KNNWB_METRIC_ABS_PEARSON,
                                        KNNWB_METRIC_SPEARMAN,  KNNWB_METRIC_COSINE};
  const size_t n = 701;
  g_autofree int32_t *group = g_new(int32_t, n);
  g_autofree int64_t *rows = g_new(int64_t, n), *index = g_new(int64_t, n),
                     *tiles = g_new(int64_t, n);
  g_autofree double *distance = g_new(double, n), *tile_distance = g_new(double, n);
  for (size_t i = 0; i < n; i++)
    rows[i] = (int64_t)(n - 1 - i); /* (any order) */
  for (guint mi = 0; mi < G_N_ELEMENTS(metrics); mi++) {
    const size_t d = 2 + mi % 3;
    KnnwbMatrix *m = random_rows(n, d, 60 + mi, 10.0);
    for (size_t i = n - 30; i < n; i++) /* copies of rows 10-39 in other groups (layouts 0, 2) */
      memcpy(m->values + i * d, m->values + (i - (n - 40)) * d, d * sizeof(float));
    KnnwbKnnOptions o;
    knnwb_knn_options_init(&o);
    o.metric = metrics[mi];
    o.backend = KNNWB_BACKEND_CPU;
    o.n_threads = 2;
    o.memory_bytes = 32 << 10;
    KnnwbPrepared p;
    GError *error = NULL;
    g_assert_true(knnwb_prepared_init(&p, m, o.metric, FALSE, "data", 1, NULL, NULL, &error));
    g_setenv("KNNWB_TREE", "1", TRUE);
    g_assert_true(knnwb_tree_outside_applies(n, d, &o));
    KnnwbTreeOutside *tree = knnwb_tree_outside_new(&p, &o, &error);
    g_assert_no_error(error);
    g_unsetenv("KNNWB_TREE");
    for (int layout = 0; layout < 4; layout++) {
      outside_groups(m, layout, -5.0, 2.5, group);
      g_assert_true(knnwb_tree_outside_run(tree, group, rows, n, index, distance, &error));
      g_assert_no_error(error);
      outside_answers(m, &o, "KNNWB_TREE", "0", group, rows, tiles, tile_distance);
      g_assert_cmpmem(index, n * sizeof(int64_t), tiles, n * sizeof(int64_t));
      g_assert_cmpmem(distance, n * sizeof(double), tile_distance, n * sizeof(double));
      outside_answers(m, &o, "KNNWB_TREE", "1", group, rows, tiles,
                      tile_distance); /* (the search's own path) */
      g_assert_cmpmem(index, n * sizeof(int64_t), tiles, n * sizeof(int64_t));
      for (size_t t = 0; t < n; t++) {
        const size_t i = (size_t)rows[t];
        int64_t best = -1;
        double best_distance = INFINITY;
        for (size_t j = 0; j < n; j++) {
          const double dist = knnwb_prepared_distance(&p, i, &p, j);
          if (group[j] != group[i] && (best < 0 || dist < best_distance)) {
            best = (int64_t)j;
            best_distance = dist;
          }
        }
        g_assert_cmpint(index[t], ==, best);
        g_assert_cmpmem(&distance[t], sizeof(double), &best_distance, sizeof(double));
      }
    }
    static volatile gint cancel = 1;
    KnnwbKnnOptions cancelled = o;
    cancelled.cancel = &cancel;
    KnnwbTreeOutside *stopped = knnwb_tree_outside_new(&p, &cancelled, &error);
    g_assert_no_error(error); /* (a tree this small is built before a poll) */
    g_assert_false(knnwb_tree_outside_run(stopped, group, rows, n, index, distance, &error));
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
    g_clear_error(&error);
    knnwb_tree_outside_free(stopped);
    knnwb_tree_outside_free(tree);
    knnwb_prepared_clear(&p);
    knnwb_matrix_free(m);
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/tree/no-gpu-start", test_no_gpu_start); /* (first: see there) */
  g_test_add_func("/tree/odd-sizes", test_odd_sizes);
  g_test_add_func("/tree/ties", test_ties);
  g_test_add_func("/tree/magnitudes", test_magnitudes);
  g_test_add_func("/tree/absent-rows", test_absent_rows);
  g_test_add_func("/tree/angular", test_angular);
  g_test_add_func("/tree/angular-degenerate", test_angular_degenerate);
  g_test_add_func("/tree/queries", test_queries);
  g_test_add_func("/tree/queries-absent", test_queries_absent);
  g_test_add_func("/tree/applies", test_applies);
  g_test_add_func("/tree/progress-and-cancel", test_progress_and_cancel);
  g_test_add_func("/tree/not-finite", test_not_finite);
  g_test_add_func("/tree/outside", test_outside);
  return g_test_run();
}
