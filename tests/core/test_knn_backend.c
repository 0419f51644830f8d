/* The backend's choice (core/engine/knn_backend.c): when the ranks of one host each take every GPU
 * they see, the run says so. mpirun gives every rank the same CUDA_VISIBLE_DEVICES unless told
 * otherwise, and ranks with no --devices of their own then run on all of them, their contexts
 * taking turns on every GPU. The decision is tested here (no GPU is needed); the notice is the
 * backend's once a process. */
#include <knnwb/knnwb.h>
#include "engine/engine.h"

static void test_gpus_shared_by_ranks(void)
{
  /* one rank on the host, however many GPUs */
  g_assert_false(knnwb_knn_gpus_shared_by_ranks(1, 0, 4));
  /* each rank sees one GPU (CUDA_VISIBLE_DEVICES from its local rank), or none */
  g_assert_false(knnwb_knn_gpus_shared_by_ranks(2, 0, 1));
  g_assert_false(knnwb_knn_gpus_shared_by_ranks(4, 0, 0));
  /* the ranks were given their GPUs (--devices): the user's choice */
  g_assert_false(knnwb_knn_gpus_shared_by_ranks(2, 2, 2));
  g_assert_false(knnwb_knn_gpus_shared_by_ranks(2, 1, 2));
  /* every rank on every GPU: as many ranks as GPUs, more, fewer */
  g_assert_true(knnwb_knn_gpus_shared_by_ranks(2, 0, 2));
  g_assert_true(knnwb_knn_gpus_shared_by_ranks(4, 0, 2));
  g_assert_true(knnwb_knn_gpus_shared_by_ranks(2, 0, 8));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/knn-backend/gpus-shared-by-ranks", test_gpus_shared_by_ranks);
  return g_test_run();
}
