/* A CPU search's self lists, for the tests of what is done with lists (kept, checked), and the
 * check that two runs gave the same lists, byte for byte. */
#ifndef KNNWB_TEST_LISTS_H
#define KNNWB_TEST_LISTS_H

#include <string.h>
#include <glib.h>
#include <knnwb/knn.h>

/* The k-nearest self lists of m (the default metric) on the CPU backend with 2 threads. */
static inline KnnwbNeighbors *knnwb_test_cpu_self_lists(const KnnwbMatrix *m, size_t k)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = k;
  options.backend = KNNWB_BACKEND_CPU;
  options.n_threads = 2;
  KnnwbNeighbors *lists = NULL;
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_knn_self(m, &options, &lists, &error));
  g_assert_no_error(error);
  return lists;
}

/* a and b the same lists, bit for bit: the first cell that differs is named. */
static inline void knnwb_test_assert_same_lists(const KnnwbNeighbors *a, const KnnwbNeighbors *b)
{
  g_assert_cmpuint(a->n_queries, ==, b->n_queries);
  g_assert_cmpuint(a->k, ==, b->k);
  const size_t cells = a->n_queries * a->k;
  for (size_t c = 0; c < cells; c++)
    if (a->indices[c] != b->indices[c] ||
        memcmp(&a->distances[c], &b->distances[c], sizeof(double)) != 0)
      g_error(
          "cell %zu (row %zu rank %zu): %" G_GINT64_FORMAT " %.17g vs %" G_GINT64_FORMAT " %.17g",
          c, c / a->k, c % a->k, a->indices[c], a->distances[c], b->indices[c], b->distances[c]);
  g_assert_cmpmem(a->n_found, a->n_queries * sizeof(int32_t), b->n_found,
                  b->n_queries * sizeof(int32_t));
}

#endif
