/* A CPU search's self lists, for the tests of what is done with lists (kept, checked). */
#ifndef KNNWB_TEST_LISTS_H
#define KNNWB_TEST_LISTS_H

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

#endif
