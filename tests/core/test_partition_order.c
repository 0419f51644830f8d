/* A split rank's block lists put back in row order (core/partition/partition_order.c), host only:
 * the lists a rank searched and the others', each run in row order, interleaved into fresh lists
 * in row order with every set row's list intact and the unset ones still unset, then empty, over
 * one batch and many (the pages each batch read are given back: a bound one row off reads
 * zeros); lists past the block (the rows brought from the others) are left alone; and step by
 * step, as the combining's rounds ask for the rows their records reach. */
#include <math.h>
#include <string.h>
#include <knnwb/knnwb.h>
#include "engine/engine.h"
#include "partition/partition_internal.h"

/* Row t's list as the search would have left it: k entries that name the row. */
static int64_t order_index(size_t t, size_t r)
{
  return (int64_t)(t * 10 + r);
}

static double order_distance(size_t t, size_t r)
{
  return (double)t + 0.25 * (double)r;
}

/* rows block rows and extra more, k wide; row t searched here when its bit of the pattern says
 * so (runs of rows and single rows), every 97th of the others unset; place[t] as
 * knnwb_partition_split_block_lists makes it. Returns the searched count. */
static size_t order_make(KnnwbNeighbors **lists, int32_t **place, size_t rows, size_t extra,
                         size_t k, size_t every)
{
  *lists = knnwb_knn_result_new_unset(0, rows + extra, k, NULL);
  g_assert_nonnull(*lists);
  *place = g_new(int32_t, MAX(rows, (size_t)1));
  size_t searched = 0;
  for (size_t t = 0; t < rows; t++)
    searched += every > 0 && ((t / 1000) % every == 0 || t % 7 == 3);
  size_t mine = 0, other = searched;
  for (size_t t = 0; t < rows; t++) {
    const gboolean here = every > 0 && ((t / 1000) % every == 0 || t % 7 == 3);
    const size_t at = here ? mine++ : other++;
    (*place)[t] = (int32_t)at;
    (*lists)->n_found[at] = !here && t % 97 == 0 ? -1 : (int32_t)k;
    for (size_t r = 0; r < k; r++) {
      (*lists)->indices[at * k + r] = (*lists)->n_found[at] < 0 ? 77 : order_index(t, r);
      (*lists)->distances[at * k + r] = (*lists)->n_found[at] < 0 ? 0.0 : order_distance(t, r);
    }
  }
  for (size_t at = rows; at < rows + extra; at++)
    for (size_t r = 0; r < k; r++)
      (*lists)->indices[at * k + r] = -5;
  return searched;
}

/* The block's lists in order: at once (step 0), or as the combining asks for them, step rows at a
 * time (each step's end a row or more past the last, the last past the block; a step back asks
 * for nothing), each row's list checked as soon as its step is done. */
static KnnwbNeighbors *order_by_steps(KnnwbNeighbors *lists, const int32_t *place, size_t rows,
                                      size_t searched, size_t batch, size_t step)
{
  KnnwbPartitionOrder order;
  g_assert_true(knnwb_partition_order_begin(&order, lists, 100, rows, place, searched, batch));
  if (step == 0) {
    knnwb_partition_order_to(&order, rows, 3);
    return order.ordered;
  }
  for (size_t end = 0; end < rows + step; end += step) {
    knnwb_partition_order_to(&order, end, 3);
    knnwb_partition_order_to(&order, end / 2, 3);
    g_assert_cmpuint(order.done, ==, MIN(end, rows));
    for (size_t t = end >= step ? end - step : 0; t < MIN(end, rows); t++)
      if (order.ordered->n_found[t] >= 0)
        g_assert_cmpint(order.ordered->indices[t * lists->k], ==, (int64_t)(t * 10));
  }
  return order.ordered;
}

static void order_check(size_t rows, size_t k, size_t every, size_t batch, size_t step)
{
  KnnwbNeighbors *lists;
  int32_t *place;
  const size_t searched = order_make(&lists, &place, rows, 1234, k, every);
  KnnwbNeighbors *ordered = order_by_steps(lists, place, rows, searched, batch, step);
  g_assert_nonnull(ordered);
  g_assert_cmpuint(ordered->n_queries, ==, rows);
  g_assert_cmpuint(ordered->first_row, ==, 100);
  for (size_t pass = 0; pass < 2; pass++) {
    for (size_t t = 0; t < rows; t++) {
      const gboolean here = every > 0 && ((t / 1000) % every == 0 || t % 7 == 3);
      const gboolean unset = !here && t % 97 == 0;
      if (unset && pass == 0) { /* (still unset: nothing written) */
        g_assert_cmpint(ordered->n_found[t], ==, -1);
        continue;
      }
      for (size_t r = 0; r < k; r++) {
        if (ordered->indices[t * k + r] != (unset ? -1 : order_index(t, r)))
          g_error("row %zu entry %zu: %" G_GINT64_FORMAT " (batch %zu, searched %zu of %zu)", t, r,
                  ordered->indices[t * k + r], batch, searched, rows);
        g_assert_cmpfloat(ordered->distances[t * k + r], ==,
                          unset ? INFINITY : order_distance(t, r));
      }
    }
    knnwb_partition_lists_empty_unset(ordered, 3);
  }
  /* (the rows past the block, untouched) */
  for (size_t r = 0; r < k; r++)
    g_assert_cmpint(lists->indices[(rows + 1233) * k + r], ==, -5);
  knnwb_neighbors_free(ordered);
  knnwb_neighbors_free(lists);
  g_free(place);
}

/* More rows than a batch holds: the default batch, and lists of a page a row (k = 512) in small
 * batches, where giving back one row too many would zero a page a later batch reads. */
static void test_batches(void)
{
  order_check(600001, 3, 3, KNNWB_PARTITION_ORDER_BATCH, 0);
  for (size_t batch = 1; batch <= 1001; batch += 250)
    order_check(3001, 512, 2, batch, 0);
}

/* Put in order as the combining's rounds ask for rows: steps shorter and longer than a batch,
 * steps of one row, and a step past the whole block. */
static void test_steps(void)
{
  order_check(600001, 3, 3, KNNWB_PARTITION_ORDER_BATCH, 100003);
  for (size_t step = 1; step <= 5001; step += 1250)
    order_check(3001, 512, 2, 301, step);
  order_check(20001, 31, 2, 999, 1);
  order_check(5001, 2, 0, 64, 7);
}

/* Every row searched here, none, and a block of one row and of none. */
static void test_edges(void)
{
  for (size_t batch = 1; batch < 2000; batch += 998) {
    order_check(5001, 2, 1, batch, 0); /* every row here */
    order_check(5001, 2, 0, batch, 0); /* none: only the others */
    order_check(1, 4, 0, batch, 0);
    order_check(0, 4, 2, batch, 0);
    order_check(20001, 31, 2, batch, 0); /* a row's list over a page's edge */
  }
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/partition-order/batches", test_batches);
  g_test_add_func("/partition-order/steps", test_steps);
  g_test_add_func("/partition-order/edges", test_edges);
  return g_test_run();
}
