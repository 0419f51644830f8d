/* The share of a host's GPUs a run takes (core/engine/knn_backend.c): mpirun starts every rank
 * with the same CUDA_VISIBLE_DEVICES, and ranks of one host that named no GPUs each took every
 * GPU, their contexts taking turns on all of them. Each now takes its share where the options name
 * none. The decision needs no GPU and is tested here; which GPUs a share holds is
 * tests/kernels/test_device_share.c's. */
#include <knnwb/knnwb.h>
#include "engine/engine.h"
#include "knnwb_kernels.h"

static KnnwbKnnGroup group_of(int rank, int size, int local_rank, int local_size)
{
  return (KnnwbKnnGroup){
      .rank = rank, .size = size, .local_rank = local_rank, .local_size = local_size};
}

static void assert_share(const KnnwbKnnOptions *options, int share, int shares)
{
  int got = -1, of = -1;
  knnwb_knn_gpu_share(options, &got, &of);
  g_assert_cmpint(got, ==, share);
  g_assert_cmpint(of, ==, shares);
}

static void test_gpu_share(void)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  /* alone: every GPU */
  assert_share(&options, 0, 1);
  /* a group of one rank */
  KnnwbKnnGroup one = group_of(0, 1, 0, 1);
  options.group = &one;
  assert_share(&options, 0, 1);
  /* ranks of one host: each its share, by its rank among the host's */
  KnnwbKnnGroup second = group_of(1, 2, 1, 2);
  options.group = &second;
  assert_share(&options, 1, 2);
  KnnwbKnnGroup third = group_of(5, 8, 2, 4); /* two hosts of four */
  options.group = &third;
  assert_share(&options, 2, 4);
  /* a rank a host: every GPU of its own */
  KnnwbKnnGroup lone = group_of(3, 4, 0, 1);
  options.group = &lone;
  assert_share(&options, 0, 1);
  /* GPUs named (--devices): the user's choice, whatever the ranks */
  const int devices[] = {1};
  options.group = &second;
  options.devices = devices;
  options.n_devices = 1;
  assert_share(&options, 0, 1);
  int ordinals[4] = {-1, -1, -1, -1};
  g_assert_cmpint(knnwb_knn_run_gpus(&options, ordinals, 4), ==, 1);
  g_assert_cmpint(ordinals[0], ==, 1);
  g_assert_cmpint(ordinals[1], ==, -1);
  /* the first n of the visible ones (devices NULL) */
  options.devices = NULL;
  options.n_devices = 2;
  g_assert_cmpint(knnwb_knn_run_gpus(&options, ordinals, 4), ==, 2);
  g_assert_cmpint(ordinals[1], ==, 1);
}

/* The run's GPUs where none are named: the share of those the driver counts (none in CI). */
static void test_run_gpus_counted(void)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  KnnwbKnnGroup second = group_of(1, 2, 1, 2);
  options.group = &second;
  const int visible = knnwb_cuda_device_count();
  int ordinals[64], expected[64];
  const int n = knnwb_knn_run_gpus(&options, ordinals, 64);
  /* rank 1 of 2: the upper half of two or more GPUs, the one GPU of one, none of none */
  g_assert_cmpint(n, ==, visible <= 0 ? 0 : visible >= 2 ? visible - visible / 2 : 1);
  g_assert_cmpint(knnwb_device_share(1, 2, visible, expected, 64), ==, n);
  for (int i = 0; i < MIN(n, 64); i++)
    g_assert_cmpint(ordinals[i], ==, expected[i]);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/knn-backend/gpu-share", test_gpu_share);
  g_test_add_func("/knn-backend/run-gpus-counted", test_run_gpus_counted);
  return g_test_run();
}
