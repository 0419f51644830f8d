/*
 * The GPUs' start (kernels/device_start.cu, or its stand-in without CUDA) as core sees it: a count
 * asked while the driver initialises is -1 or the count, never a wrong one; every waiting caller
 * gets the same count; the guess core's speed-only choices take (knnwb_knn_expects_gpu) is FALSE
 * only when no GPU will run the search; after the start, guess and answer agree. Needs no GPU: on
 * a machine without one the count is 0 (CI).
 */
#include <knnwb/knnwb.h>
#include "knnwb_kernels.h"

#define CALLERS 6

static gpointer count_devices(gpointer data)
{
  (void)data;
  return GINT_TO_POINTER(knnwb_cuda_device_count());
}

static void test_start_count(void)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options); /* backend auto */
  knnwb_knn_devices_start(&options);
  const int early = knnwb_cuda_device_count_now();
  const gboolean guess = knnwb_knn_expects_gpu(&options);
  GThread *callers[CALLERS];
  for (int t = 0; t < CALLERS; t++)
    callers[t] = g_thread_new("count", count_devices, NULL);
  const int count = knnwb_cuda_device_count();
  g_assert_cmpint(count, >=, 0);
  for (int t = 0; t < CALLERS; t++)
    g_assert_cmpint(GPOINTER_TO_INT(g_thread_join(callers[t])), ==, count);
  g_assert_true(early == -1 || early == count);
  if (!guess)
    g_assert_cmpint(count, ==, 0); /* FALSE only when no GPU is there */
  /* once counted, the guess is the answer */
  g_assert_cmpint(knnwb_cuda_device_count_now(), ==, count);
  g_assert_true(knnwb_knn_expects_gpu(&options) == (count > 0));
  g_assert_true(knnwb_knn_uses_gpu(&options) == (count > 0));
  knnwb_knn_devices_start(&options); /* once a process: nothing more */
  knnwb_knn_devices_wait();
  g_assert_true(knnwb_knn_devices_started() == (count > 0));
  g_assert_cmpint(knnwb_cuda_device_count(), ==, count);
  /* the backends named by the options decide without a GPU's answer */
  options.backend = KNNWB_BACKEND_CPU;
  g_assert_false(knnwb_knn_expects_gpu(&options));
  g_assert_false(knnwb_knn_uses_gpu(&options));
  options.backend = KNNWB_BACKEND_CUDA;
  g_assert_true(knnwb_knn_expects_gpu(&options));
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/cuda-start/count", test_start_count);
  return g_test_run();
}
