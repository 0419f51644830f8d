/* Lists' arrays kept from one search to the next on a thread (knnwb_knn_result_keep_set, used by
 * the partitioned run's workers): a search takes the kept arrays when they are large enough, writes
 * every slot of them (the kept bytes are poisoned first, so a slot left unwritten shows), and
 * gives lists equal to a search without a keep; larger lists replace what is kept, smaller ones
 * are freed. CPU backend; host only. */
#include <string.h>
#include <knnwb/knnwb.h>
#include "engine/engine.h"
#include "knnwb_test_lists.h"
#include "knnwb_test_matrix.h"

static void test_reuse(void)
{
  const size_t n = 777, k = 9;
  g_autoptr(KnnwbMatrix) m = knnwb_test_random_matrix(n, 13, 17);
  g_autoptr(KnnwbNeighbors) fresh = knnwb_test_cpu_self_lists(m, k);

  KnnwbResultKeep keep = {0};
  knnwb_knn_result_keep_set(&keep);
  KnnwbNeighbors *first = knnwb_test_cpu_self_lists(m, k);
  int64_t *const kept_indices = first->indices;
  knnwb_knn_result_keep_put(&keep, first);
  g_assert_cmpuint(keep.cells, ==, n * k);
  g_assert_true(keep.indices == kept_indices);

  memset(keep.indices, 0x5a, keep.cells * sizeof(int64_t));
  memset(keep.distances, 0xa5, keep.cells * sizeof(double));
  KnnwbNeighbors *second = knnwb_test_cpu_self_lists(m, k);
  g_assert_true(second->indices == kept_indices); /* the kept arrays served */
  g_assert_cmpuint(keep.cells, ==, 0);
  knnwb_test_assert_same_lists(second, fresh);
  knnwb_knn_result_keep_put(&keep, second);

  /* Larger lists than kept: fresh arrays, and the kept ones stay for later. */
  g_autoptr(KnnwbNeighbors) fresh_larger = knnwb_test_cpu_self_lists(m, k + 3);
  KnnwbNeighbors *larger = knnwb_test_cpu_self_lists(m, k + 3);
  g_assert_true(larger->indices != kept_indices);
  g_assert_true(keep.indices == kept_indices);
  knnwb_test_assert_same_lists(larger, fresh_larger);
  int64_t *const larger_indices = larger->indices;
  knnwb_knn_result_keep_put(&keep, larger); /* replaces the smaller ones */
  g_assert_cmpuint(keep.cells, ==, n * (k + 3));
  g_assert_true(keep.indices == larger_indices);

  /* Smaller lists take the larger arrays; given back, they count as large as they are. */
  KnnwbNeighbors *smaller = knnwb_test_cpu_self_lists(m, 2);
  g_assert_true(smaller->indices == larger_indices);
  knnwb_knn_result_keep_put(&keep, smaller);
  g_assert_cmpuint(keep.cells, ==, n * (k + 3));
  memset(keep.indices, 0x5a, keep.cells * sizeof(int64_t));
  KnnwbNeighbors *again = knnwb_test_cpu_self_lists(m, k);
  g_assert_true(again->indices == larger_indices);
  knnwb_test_assert_same_lists(again, fresh);
  /* Smaller lists of other arrays than the kept ones are freed. */
  KnnwbNeighbors *other = knnwb_test_cpu_self_lists(m, 2);
  g_assert_true(other->indices != larger_indices);
  knnwb_knn_result_keep_put(&keep, again);
  knnwb_knn_result_keep_put(&keep, other);
  g_assert_true(keep.indices == larger_indices);
  g_assert_cmpuint(keep.cells, ==, n * (k + 3));

  knnwb_knn_result_keep_set(NULL);
  KnnwbNeighbors *unkept = knnwb_test_cpu_self_lists(m, 2);
  g_assert_true(unkept->indices != keep.indices); /* no keep set: fresh arrays */
  knnwb_neighbors_free(unkept);
  knnwb_knn_result_keep_clear(&keep);
  g_assert_null(keep.indices);
  g_assert_cmpuint(keep.cells, ==, 0);
  knnwb_knn_result_keep_put(&keep, NULL); /* ignored */
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/core/result-keep/reuse", test_reuse);
  return g_test_run();
}
