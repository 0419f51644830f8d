/* The rows' order for a GPU's tile loop (core/engine/row_order.c), host only: a permutation that
 * keeps rows of one cluster together, invalid rows last. Whether the GPU honours it without
 * changing a byte is tests/kernels/test_cuda_knn.c's (row-order). */
#include <string.h>
#include <knnwb/knnwb.h>
#include "engine/engine_internal.h"

/* n rows of d values, row i in cluster i % clusters (clusters far apart: centres 0, 100, 200, ...
 * in the first column, spread 1), every `invalid_every`-th row marked invalid (0: none). */
typedef struct {
  KnnwbPrepared p;
  float *rows;
  unsigned char *invalid;
} Rows;

static void rows_make(Rows *r, size_t n, size_t d, size_t clusters, size_t invalid_every,
                      guint32 seed)
{
  g_autoptr(GRand) rand = g_rand_new_with_seed(seed);
  memset(r, 0, sizeof *r);
  r->rows = g_new(float, n * d);
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < d; j++)
      r->rows[i * d + j] =
          (float)((j == 0 ? 100.0 * (double)(i % clusters) : 0.0) + g_rand_double(rand));
  r->p.metric = KNNWB_METRIC_EUCLIDEAN;
  r->p.n = n;
  r->p.d = d;
  r->p.scored = r->rows;
  if (invalid_every > 0) {
    r->invalid = g_new0(unsigned char, n);
    for (size_t i = 0; i < n; i += invalid_every) {
      r->invalid[i] = 1;
      r->p.n_invalid++;
    }
    r->p.invalid = r->invalid;
  }
}

static void rows_clear(Rows *r)
{
  g_free(r->rows);
  g_free(r->invalid);
}

static void test_groups_clusters(void)
{
  const size_t n = 6007, d = 9, clusters = 8;
  Rows r;
  rows_make(&r, n, d, clusters, 13, 1);
  g_autofree int64_t *order = knnwb_row_order_build(&r.p, 2);
  g_assert_nonnull(order);
  /* a permutation */
  g_autofree unsigned char *seen = g_new0(unsigned char, n);
  for (size_t t = 0; t < n; t++) {
    g_assert_cmpint(order[t], >=, 0);
    g_assert_cmpint(order[t], <, (gint64)n);
    g_assert_false(seen[order[t]]);
    seen[order[t]] = 1;
  }
  /* invalid rows last, ascending; valid rows before them */
  const size_t valid = n - r.p.n_invalid;
  for (size_t t = 0; t < n; t++) {
    g_assert_cmpint(r.invalid[order[t]], ==, t >= valid);
    if (t > valid)
      g_assert_cmpint(order[t], >, order[t - 1]);
  }
  /* Rows of one cluster together: in the given order the cluster changes at every row; grouped by
   * 64 cells (each inside one cluster), at most 63 times. */
  size_t changes = 0;
  for (size_t t = 1; t < valid; t++)
    changes += order[t] % (gint64)clusters != order[t - 1] % (gint64)clusters;
  g_assert_cmpuint(changes, <=, 63);
  g_assert_cmpuint(changes, >=, clusters - 1);
  rows_clear(&r);
}

static void test_nothing_to_group(void)
{
  Rows r;
  rows_make(&r, 500, 4, 3, 0, 2);
  g_setenv("KNNWB_ROW_ORDER_CELLS", "0", TRUE);
  g_assert_null(knnwb_row_order_build(&r.p, 2));
  g_setenv("KNNWB_ROW_ORDER_CELLS", "1", TRUE);
  g_assert_null(knnwb_row_order_build(&r.p, 2));
  g_setenv("KNNWB_ROW_ORDER_CELLS", "2", TRUE);
  g_autofree int64_t *two = knnwb_row_order_build(&r.p, 2);
  g_assert_nonnull(two);
  g_unsetenv("KNNWB_ROW_ORDER_CELLS");
  rows_clear(&r);
  /* three valid rows of seven: no two cells of two rows */
  rows_make(&r, 7, 4, 3, 2, 3);
  g_assert_cmpuint(r.p.n_invalid, ==, 4);
  g_assert_null(knnwb_row_order_build(&r.p, 2));
  rows_clear(&r);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/core/row-order/groups-clusters", test_groups_clusters);
  g_test_add_func("/core/row-order/nothing-to-group", test_nothing_to_group);
  return g_test_run();
}
