/* The nearest row outside each row's group through cells of the rows (core/partition/
 * partition_outside.c): the exact MST's question on rows of many columns. */
#include <math.h>
#include <string.h>
#include <knnwb/knnwb.h>
#include "engine/engine.h"
#include "partition/partition.h"
#include "outside_search.h"
#include "uniform_clusters.h"

static const KnnwbMetric metrics[] = {KNNWB_METRIC_EUCLIDEAN, KNNWB_METRIC_MANHATTAN,
                                      KNNWB_METRIC_PEARSON,   KNNWB_METRIC_ABS_PEARSON,
                                      KNNWB_METRIC_SPEARMAN,  KNNWB_METRIC_COSINE};

/* The answers against a brute force over the engine's exact distances (ties to the lower row),
 * bit for bit. */
static void check_brute_force(const KnnwbPrepared *p, const int32_t *group, const int64_t *rows,
                              const int64_t *index, const double *distance)
{
  for (size_t t = 0; t < p->n; t++) {
    const size_t i = (size_t)rows[t];
    int64_t best = -1;
    double best_distance = INFINITY;
    for (size_t j = 0; j < p->n; j++) {
      const double dist = knnwb_prepared_distance(p, i, p, j);
      if (group[j] != group[i] && (best < 0 || dist < best_distance)) {
        best = (int64_t)j;
        best_distance = dist;
      }
    }
    g_assert_cmpint(index[t], ==, best);
    g_assert_cmpmem(&distance[t], sizeof(double), &best_distance, sizeof(double));
  }
}

/* A run of the cells over every row of p (KNNWB_OUTSIDE_CELLS=1: no pilot) answers each of them,
 * as the brute force does. */
static void check_cells_answer_all(KnnwbPartitionOutside *cells, const KnnwbPrepared *p,
                                   const int32_t *group, const int64_t *rows,
                                   const size_t *available, int64_t *index, double *distance,
                                   unsigned char *answered)
{
  GError *error = NULL;
  g_setenv("KNNWB_OUTSIDE_CELLS", "1", TRUE);
  g_assert_true(knnwb_partition_outside_run(cells, group, rows, p->n, available, index, distance,
                                            answered, &error));
  g_assert_no_error(error);
  for (size_t t = 0; t < p->n; t++)
    g_assert_cmpint(answered[t], ==, 1);
  check_brute_force(p, group, rows, index, distance);
}

/* Every metric, rows in clusters of 11 columns with copies of rows in other groups (exact ties),
 * the groups of outside_groups: the cells' answers (every row, KNNWB_OUTSIDE_CELLS=1) equal the
 * tile search's (=0), the pilot's with the tile search's for the rest (=pilot), and the brute
 * force, bit for bit. */
static void test_answers(void)
{
  const size_t n = 1201, d = 11;
  g_autofree int32_t *group = g_new(int32_t, n);
  g_autofree int64_t *rows = g_new(int64_t, n), *index = g_new(int64_t, n),
                     *tiles = g_new(int64_t, n);
  g_autofree double *distance = g_new(double, n), *tile_distance = g_new(double, n);
  g_autofree size_t *available = g_new(size_t, n);
  g_autofree unsigned char *answered = g_new(unsigned char, n);
  for (size_t i = 0; i < n; i++)
    rows[i] = (int64_t)(n - 1 - i); /* (any order) */
  for (guint mi = 0; mi < G_N_ELEMENTS(metrics); mi++) {
    KnnwbMatrix *m = uniform_clusters(n, d, 13, 10.0, 1.0 + mi % 2, 90 + mi);
    for (size_t i = n - 30; i < n; i++) /* copies of rows 10-39 (in other groups under 0 and 2) */
      memcpy(m->values + i * d, m->values + (i - (n - 40)) * d, d * sizeof(float));
    KnnwbKnnOptions o;
    knnwb_knn_options_init(&o);
    o.metric = metrics[mi];
    o.backend = KNNWB_BACKEND_CPU;
    o.n_threads = 2;
    o.memory_bytes = 64 << 10;
    KnnwbPrepared p;
    GError *error = NULL;
    g_assert_true(knnwb_prepared_init(&p, m, o.metric, FALSE, "data", 1, NULL, NULL, &error));
    g_setenv("KNNWB_OUTSIDE_CELLS", "1", TRUE);
    g_assert_true(knnwb_partition_outside_applies(&p, 1));
    KnnwbPartitionOutside *cells = knnwb_partition_outside_new(&p, &o, &error);
    g_assert_no_error(error);
    g_assert_nonnull(cells);
    for (int layout = 0; layout < 4; layout++) {
      outside_groups(m, layout, -12.0, 6.0, group);
      for (size_t t = 0; t < n; t++) {
        available[t] = 0;
        for (size_t j = 0; j < n; j++)
          available[t] += group[j] != group[rows[t]];
      }
      check_cells_answer_all(cells, &p, group, rows, available, index, distance, answered);
      outside_answers(m, &o, "KNNWB_OUTSIDE_CELLS", "0", group, rows, tiles, tile_distance);
      g_assert_cmpmem(index, n * sizeof(int64_t), tiles, n * sizeof(int64_t));
      g_assert_cmpmem(distance, n * sizeof(double), tile_distance, n * sizeof(double));
      outside_answers(m, &o, "KNNWB_OUTSIDE_CELLS", "pilot", group, rows, tiles, tile_distance);
      g_assert_cmpmem(index, n * sizeof(int64_t), tiles, n * sizeof(int64_t));
      g_assert_cmpmem(distance, n * sizeof(double), tile_distance, n * sizeof(double));
      outside_answers(m, &o, "KNNWB_OUTSIDE_CELLS", "1", group, rows, tiles,
                      tile_distance); /* (through the search) */
      g_assert_cmpmem(index, n * sizeof(int64_t), tiles, n * sizeof(int64_t));
    }
    /* The pilot alone: 128 rows answered, the rest left to the tile search. */
    g_setenv("KNNWB_OUTSIDE_CELLS", "pilot", TRUE);
    outside_groups(m, 0, 0.0, 1.0, group);
    for (size_t t = 0; t < n; t++)
      available[t] = n - n / 7 - (rows[t] % 7 < (int64_t)(n % 7)); /* (rows outside row % 7) */
    g_assert_true(knnwb_partition_outside_run(cells, group, rows, n, available, index, distance,
                                              answered, &error));
    size_t count = 0;
    for (size_t t = 0; t < n; t++)
      count += answered[t];
    g_assert_cmpuint(count, ==, 128);
    g_unsetenv("KNNWB_OUTSIDE_CELLS");
    knnwb_partition_outside_free(cells);
    knnwb_prepared_clear(&p);
    knnwb_matrix_free(m);
  }
}

/* The float screens against pairs they cannot tell apart: group 1's rows are copies of one row
 * with one column nudged a few float steps, so that a group 0 row's distances to them differ by
 * less than the screen's error (about 1e-6 of them) but not in double, and some are exact ties.
 * Under euclidean and manhattan the copied row lies far from the origin; under the pearson family
 * and cosine it is random around 0, where a float step moves r by about 1e-8. Every row's answer
 * is the brute force's, bit for bit, under every metric, on column counts with and without a tail
 * of the screens' eight lanes. */
static void test_screen_near_ties(void)
{
  const size_t n = 601, half = 300;
  const size_t columns[] = {37, 64};
  g_autofree int32_t *group = g_new(int32_t, n);
  g_autofree int64_t *rows = g_new(int64_t, n), *index = g_new(int64_t, n);
  g_autofree double *distance = g_new(double, n);
  g_autofree size_t *available = g_new(size_t, n);
  g_autofree unsigned char *answered = g_new(unsigned char, n);
  for (guint ci = 0; ci < G_N_ELEMENTS(columns); ci++)
    for (guint mi = 0; mi < G_N_ELEMENTS(metrics); mi++) {
      const size_t d = columns[ci];
      g_autoptr(GRand) rand = g_rand_new_with_seed(7 + ci * 2 + mi);
      const gboolean lp =
          metrics[mi] == KNNWB_METRIC_EUCLIDEAN || metrics[mi] == KNNWB_METRIC_MANHATTAN;
      g_autofree float *copied = g_new(float, d);
      for (size_t j = 0; j < d; j++)
        copied[j] = lp ? 1005.0f : (float)g_rand_double_range(rand, -1.0, 1.0);
      KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
      for (size_t i = 0; i < n; i++) {
        rows[i] = (int64_t)i;
        group[i] = i < half ? 0 : 1;
        available[i] = i < half ? n - half : half;
        for (size_t j = 0; j < d; j++) {
          float v = (float)(1000.0 + g_rand_double_range(rand, -1.0, 1.0));
          if (i >= half) { /* (the copies: steps of 0 to 3 on column (i / 4) % d, up or down) */
            v = copied[j];
            for (size_t step = 0; j == (i / 4) % d && step < i % 4; step++)
              v = nextafterf(v, (i / 2) % 2 ? 2000.0f : 0.0f);
          }
          m->values[i * d + j] = v;
        }
      }
      KnnwbKnnOptions o;
      knnwb_knn_options_init(&o);
      o.metric = metrics[mi];
      o.n_threads = 2;
      KnnwbPrepared p;
      GError *error = NULL;
      g_assert_true(knnwb_prepared_init(&p, m, o.metric, FALSE, "data", 1, NULL, NULL, &error));
      g_setenv("KNNWB_OUTSIDE_CELLS", "1", TRUE);
      KnnwbPartitionOutside *cells = knnwb_partition_outside_new(&p, &o, &error);
      g_assert_no_error(error);
      check_cells_answer_all(cells, &p, group, rows, available, index, distance, answered);
      g_unsetenv("KNNWB_OUTSIDE_CELLS");
      knnwb_partition_outside_free(cells);
      knnwb_prepared_clear(&p);
      knnwb_matrix_free(m);
    }
}

/* A raised cancel stops making the cells and a run, with KNNWB_ERROR_CANCELLED. */
static void test_cancel(void)
{
  const size_t n = 700, d = 9;
  KnnwbMatrix *m = uniform_clusters(n, d, 5, 10.0, 1.0, 7);
  KnnwbKnnOptions o;
  knnwb_knn_options_init(&o);
  o.metric = KNNWB_METRIC_EUCLIDEAN;
  KnnwbPrepared p;
  GError *error = NULL;
  g_assert_true(knnwb_prepared_init(&p, m, o.metric, FALSE, "data", 1, NULL, NULL, &error));
  static volatile gint cancel = 0;
  o.cancel = &cancel;
  g_setenv("KNNWB_OUTSIDE_CELLS", "1", TRUE);
  KnnwbPartitionOutside *cells = knnwb_partition_outside_new(&p, &o, &error);
  g_assert_no_error(error);
  g_autofree int32_t *group = g_new0(int32_t, n);
  g_autofree int64_t *rows = g_new(int64_t, n), *index = g_new(int64_t, n);
  g_autofree double *distance = g_new(double, n);
  g_autofree size_t *available = g_new(size_t, n);
  g_autofree unsigned char *answered = g_new(unsigned char, n);
  for (size_t i = 0; i < n; i++) {
    rows[i] = (int64_t)i;
    group[i] = (int32_t)(i % 2);
    available[i] = n / 2;
  }
  g_atomic_int_set(&cancel, 1);
  g_assert_false(knnwb_partition_outside_run(cells, group, rows, n, available, index, distance,
                                             answered, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
  g_clear_error(&error);
  g_assert_null(knnwb_partition_outside_new(&p, &o, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED);
  g_clear_error(&error);
  g_unsetenv("KNNWB_OUTSIDE_CELLS");
  knnwb_partition_outside_free(cells);
  knnwb_prepared_clear(&p);
  knnwb_matrix_free(m);
}

/* The pilot decides by itself (KNNWB_OUTSIDE_CELLS unset): on clusters far apart, whose groups are
 * the clusters, the cells answer every row; on rows without clusters the pilot stops early (its
 * rows would compare with most rows), leaves the rest to the tile search, and after two such runs
 * the cells answer nothing. The answers are the brute force's either way. */
static void test_pilot(void)
{
  const size_t n = 1201, d = 11, clusters = 13;
  g_autoptr(GRand) rand = g_rand_new_with_seed(31);
  g_autofree int32_t *group = g_new(int32_t, n);
  g_autofree int64_t *rows = g_new(int64_t, n), *index = g_new(int64_t, n);
  g_autofree double *distance = g_new(double, n);
  g_autofree size_t *available = g_new(size_t, n);
  g_autofree unsigned char *answered = g_new(unsigned char, n);
  g_autofree double *centre = g_new(double, clusters *d);
  for (size_t v = 0; v < clusters * d; v++)
    centre[v] = g_rand_double_range(rand, -100.0, 100.0);
  for (int apart = 1; apart >= 0; apart--) {
    KnnwbMatrix *m = knnwb_matrix_new(n, d, NULL);
    for (size_t i = 0; i < n; i++) {
      rows[i] = (int64_t)i;
      group[i] = (int32_t)(i % clusters);
      for (size_t j = 0; j < d; j++)
        m->values[i * d + j] = (float)((apart ? centre[(i % clusters) * d + j] : 0.0) +
                                       g_rand_double_range(rand, -1.0, 1.0));
    }
    for (size_t t = 0; t < n; t++)
      available[t] = n - (n / clusters + ((size_t)t % clusters < n % clusters));
    KnnwbKnnOptions o;
    knnwb_knn_options_init(&o);
    o.metric = KNNWB_METRIC_EUCLIDEAN;
    o.n_threads = 2;
    KnnwbPrepared p;
    GError *error = NULL;
    g_assert_true(knnwb_prepared_init(&p, m, o.metric, FALSE, "data", 1, NULL, NULL, &error));
    KnnwbPartitionOutside *cells = knnwb_partition_outside_new(&p, &o, &error);
    g_assert_no_error(error);
    for (int run = 0; run < 3; run++) {
      g_assert_true(knnwb_partition_outside_run(cells, group, rows, n, available, index, distance,
                                                answered, &error));
      g_assert_no_error(error);
      size_t count = 0;
      for (size_t t = 0; t < n; t++)
        count += answered[t];
      if (apart)
        g_assert_cmpuint(count, ==, n);
      else if (run < 2)
        g_assert_true(count > 0 && count < 128);
      else
        g_assert_cmpuint(count, ==, 0);
      size_t kept = 0; /* (the answered rows against the brute force) */
      for (size_t t = 0; t < n; t++)
        if (answered[t]) {
          rows[kept] = rows[t];
          index[kept] = index[t];
          distance[kept++] = distance[t];
        }
      for (size_t t = 0; t < kept; t++) {
        int64_t best = -1;
        double best_distance = INFINITY;
        for (size_t j = 0; j < n; j++) {
          const double dist = knnwb_prepared_distance(&p, (size_t)rows[t], &p, j);
          if (group[j] != group[rows[t]] && (best < 0 || dist < best_distance)) {
            best = (int64_t)j;
            best_distance = dist;
          }
        }
        g_assert_cmpint(index[t], ==, best);
        g_assert_cmpmem(&distance[t], sizeof(double), &best_distance, sizeof(double));
      }
      for (size_t i = 0; i < n; i++)
        rows[i] = (int64_t)i;
    }
    knnwb_partition_outside_free(cells);
    knnwb_prepared_clear(&p);
    knnwb_matrix_free(m);
  }
}

/* When the cells take a run: never with rows left out or KNNWB_OUTSIDE_CELLS=0; by themselves
 * from KNNWB_OUTSIDE_MIN_ROWS rows and 512 asking ones; at any size with =1. */
static void test_applies(void)
{
  KnnwbPrepared p = {.metric = KNNWB_METRIC_EUCLIDEAN, .n = KNNWB_OUTSIDE_MIN_ROWS, .d = 50};
  float row = 0.0f;
  p.exact = &row; /* (only looked at for NULL) */
  g_assert_true(knnwb_partition_outside_applies(&p, 512));
  g_assert_false(knnwb_partition_outside_applies(&p, 511));
  p.n = KNNWB_OUTSIDE_MIN_ROWS - 1;
  g_assert_false(knnwb_partition_outside_applies(&p, 100000));
  g_setenv("KNNWB_OUTSIDE_CELLS", "1", TRUE);
  g_assert_true(knnwb_partition_outside_applies(&p, 1));
  p.n_invalid = 1;
  g_assert_false(knnwb_partition_outside_applies(&p, 1));
  p.n_invalid = 0;
  g_setenv("KNNWB_OUTSIDE_CELLS", "0", TRUE);
  p.n = KNNWB_OUTSIDE_MIN_ROWS;
  g_assert_false(knnwb_partition_outside_applies(&p, 100000));
  g_unsetenv("KNNWB_OUTSIDE_CELLS");
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_unsetenv("KNNWB_OUTSIDE_CELLS");
  g_test_add_func("/partition/outside", test_answers);
  g_test_add_func("/partition/outside-screen", test_screen_near_ties);
  g_test_add_func("/partition/outside-pilot", test_pilot);
  g_test_add_func("/partition/outside-cancel", test_cancel);
  g_test_add_func("/partition/outside-applies", test_applies);
  return g_test_run();
}
