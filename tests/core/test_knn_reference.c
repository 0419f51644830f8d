/* A reference prepared once (knnwb_knn_reference_new) answers every query exactly as
 * knnwb_knn_query does: same indices, same distance bits, for every metric, several queries in a
 * row, degenerate rows dropped; a query for another metric is refused. */
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/knn.h>
#include "knnwb_test_matrix.h"
#include "knnwb_test_lists.h"

static void test_same_as_query(void)
{
  g_autoptr(KnnwbMatrix) reference = knnwb_test_random_matrix(157, 11, 3);
  for (int metric = 0; metric < KNNWB_METRIC_COUNT; metric++) {
    KnnwbKnnOptions options;
    knnwb_knn_options_init(&options);
    options.metric = (KnnwbMetric)metric;
    options.backend = KNNWB_BACKEND_CPU;
    g_autoptr(GError) error = NULL;
    g_autoptr(KnnwbKnnReference) prepared = knnwb_knn_reference_new(reference, &options, &error);
    g_assert_no_error(error);
    for (guint32 round = 0; round < 3; round++) {
      g_autoptr(KnnwbMatrix) query = knnwb_test_random_matrix(1 + 17 * round, 11, 40 + round);
      if (round == 2) /* a query row equal to a reference row: distance 0, ties by index */
        memcpy(query->values, reference->values + 5 * 11, 11 * sizeof(float));
      options.k = 1 + 6 * round;
      g_autoptr(KnnwbNeighbors) direct = NULL, reused = NULL;
      g_assert_true(knnwb_knn_query(query, reference, &options, &direct, &error));
      g_assert_true(knnwb_knn_reference_query(prepared, query, &options, &reused, &error));
      g_assert_no_error(error);
      knnwb_test_assert_same_lists(direct, reused);
    }
    options.metric = (KnnwbMetric)((metric + 1) % KNNWB_METRIC_COUNT);
    g_autoptr(KnnwbNeighbors) refused = NULL;
    g_assert_false(knnwb_knn_reference_query(prepared, reference, &options, &refused, &error));
    g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
  }
}

static void test_degenerate_and_errors(void)
{
  g_autoptr(KnnwbMatrix) reference = knnwb_test_random_matrix(40, 6, 9);
  for (int j = 0; j < 6; j++)
    reference->values[7 * 6 + j] = 2.0f; /* a constant row */
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = 4;
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbKnnReference) refused = knnwb_knn_reference_new(reference, &options, &error);
  g_assert_null(refused);
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA);
  g_clear_error(&error);
  options.drop_degenerate = TRUE;
  g_test_expect_message(NULL, G_LOG_LEVEL_WARNING, "*constant*");
  g_autoptr(KnnwbKnnReference) prepared = knnwb_knn_reference_new(reference, &options, &error);
  g_test_assert_expected_messages();
  g_assert_nonnull(prepared);
  g_autoptr(KnnwbMatrix) query = knnwb_test_random_matrix(9, 6, 10);
  g_autoptr(KnnwbNeighbors) direct = NULL, reused = NULL;
  g_test_expect_message(NULL, G_LOG_LEVEL_WARNING, "*constant*");
  g_assert_true(knnwb_knn_query(query, reference, &options, &direct, &error));
  g_test_assert_expected_messages();
  g_assert_true(knnwb_knn_reference_query(prepared, query, &options, &reused, &error));
  knnwb_test_assert_same_lists(direct, reused);
  for (size_t i = 0; i < reused->n_queries * reused->k; i++)
    g_assert_cmpint(reused->indices[i], !=, 7);
  /* Wrong width, k beyond the rows: the query's own checks. */
  g_autoptr(KnnwbMatrix) narrow = knnwb_test_random_matrix(3, 5, 11);
  g_autoptr(KnnwbNeighbors) none = NULL;
  g_assert_false(knnwb_knn_reference_query(prepared, narrow, &options, &none, &error));
  g_clear_error(&error);
  options.k = 40;
  g_assert_false(knnwb_knn_reference_query(prepared, query, &options, &none, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/core/knn-reference/same-as-query", test_same_as_query);
  g_test_add_func("/core/knn-reference/degenerate-and-errors", test_degenerate_and_errors);
  return g_test_run();
}
