/* The last check of every search's lists (knnwb_knn_result_check): a CPU search's lists pass it,
 * and each way a list can break the contract (a row named twice, as overlapping shares of a group
 * would give; lists out of (distance, row) order; the row itself; a row past the input; a NaN
 * distance; a count out of range; a filled slot past the count) is refused with the row named.
 * Host only. */
#include <math.h>
#include <string.h>
#include <knnwb/knnwb.h>
#include "engine/engine_internal.h"
#include "knnwb_test_lists.h"
#include "knnwb_test_matrix.h"

enum { N = 301, K = 7, ROW = 123 };

/* A copy of lists whose row ROW is spoiled as fault says; checked, must be refused. */
static void assert_refused(const KnnwbNeighbors *lists, int fault, const char *reason)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(KnnwbNeighbors) bad = knnwb_knn_result_new(0, lists->n_queries, lists->k, &error);
  g_assert_no_error(error);
  memcpy(bad->indices, lists->indices, N * K * sizeof(int64_t));
  memcpy(bad->distances, lists->distances, N * K * sizeof(double));
  memcpy(bad->n_found, lists->n_found, N * sizeof(int32_t));
  int64_t *index = bad->indices + ROW * K;
  double *distance = bad->distances + ROW * K;
  switch (fault) {
  case 0: /* a row twice, as two shares that overlap list it */
    index[3] = index[2];
    distance[3] = distance[2];
    break;
  case 1: /* out of order */
    distance[4] = distance[5] + 1;
    break;
  case 2: /* ties not by the lower index */
    distance[2] = distance[1];
    index[2] = index[1] - 1 >= 0 && index[1] - 1 != ROW ? index[1] - 1 : index[1] + 1000;
    break;
  case 3:
    index[0] = ROW;
    break;
  case 4:
    index[6] = N;
    break;
  case 5:
    distance[1] = NAN;
    break;
  case 6:
    bad->n_found[ROW] = K + 1;
    break;
  case 7: /* a slot past the count filled */
    bad->n_found[ROW] = K - 1;
    break;
  }
  g_assert_false(knnwb_knn_result_check(bad, TRUE, N, 2, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED);
  g_assert_nonnull(strstr(error->message, "row 123 "));
  if (reason != NULL && strstr(error->message, reason) == NULL)
    g_error("fault %d: \"%s\" lacks \"%s\"", fault, error->message, reason);
}

static void test_check(void)
{
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(N, 11, 5);
  g_autoptr(KnnwbNeighbors) lists = knnwb_test_cpu_self_lists(m, K);
  g_autoptr(GError) error = NULL;
  g_assert_true(knnwb_knn_result_check(lists, TRUE, N, 2, &error));
  g_assert_no_error(error);
  g_assert_cmpint(lists->n_found[ROW], ==, K);
  const char *reasons[] = {"twice",          "order",        NULL,    "itself",
                           "does not exist", "not a number", "count", "past its count"};
  for (int fault = 0; fault < 8; fault++)
    assert_refused(lists, fault, reasons[fault]);
  /* Shorter lists (fewer found, empty slots after) and empty rows pass. */
  lists->n_found[ROW] = 3;
  for (int s = 3; s < K; s++) {
    lists->indices[ROW * K + s] = -1;
    lists->distances[ROW * K + s] = INFINITY;
  }
  lists->n_found[ROW + 1] = 0;
  for (int s = 0; s < K; s++)
    lists->indices[(ROW + 1) * K + s] = -1;
  g_assert_true(knnwb_knn_result_check(lists, TRUE, N, 2, &error));
  g_assert_no_error(error);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/core/result-check", test_check);
  return g_test_run();
}
