/*
 * The GPUs' start (kernels/device_start.cu, or its stand-in without CUDA) as core sees it: a count
 * asked while the driver initialises is -1 or the count, never a wrong one; every waiting caller
 * gets the same count; the guess core's speed-only choices take (knnwb_knn_expects_gpu) is FALSE
 * only when no GPU will run the search; after the start, guess and answer agree; the tile GEMM's
 * choice and the rows' upload begun ahead. Needs no GPU: on a machine without one the count is 0
 * (CI).
 */
#include <string.h>
#include <glib/gstdio.h>
#include <knnwb/knnwb.h>
#include "knnwb_kernels.h"
#include "select_plan.h"

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

/*
 * The tile GEMM's choice begun ahead (kernels/gemm_start.cu): made on a GPU for a run that times
 * it (200,000 rows: 12 x 12 full tiles), not for one that does not (100,000 rows: 6 x 6), once
 * waited for; a second shape after the first. Without a GPU (CI) nothing is known and nothing
 * waits. KNNWB_CUDA_GEMM or KNNWB_CUDA_GEMM_START=0 in the environment skip the choice.
 */
static void test_gemm_choice_ahead(void)
{
  const gboolean skipped =
      g_getenv("KNNWB_CUDA_GEMM") != NULL || g_strcmp0(g_getenv("KNNWB_CUDA_GEMM_START"), "0") == 0;
  const int count = knnwb_cuda_device_count();
  const gboolean expected = count > 0 && !skipped;
  /* The choices go to a cache file of the test's own (kernels/gemm_cache.h), whose lines another
   * process would take (KNNWB_CUDA_GEMM_CACHE=... set outside: that file, whatever it holds). */
  g_autofree char *dir = NULL;
  g_autofree char *cache = g_strdup(g_getenv("KNNWB_CUDA_GEMM_CACHE"));
  if (cache == NULL) {
    dir = g_dir_make_tmp("knnwb-start-XXXXXX", NULL);
    g_assert_nonnull(dir);
    cache = g_build_filename(dir, "gemm-choices", NULL);
    g_setenv("KNNWB_CUDA_GEMM_CACHE", cache, TRUE);
  }
  knnwb_cuda_gemm_start(NULL, 0, 0, 1, 200000, 200000, 50);
  knnwb_cuda_gemm_start(NULL, 0, 0, 1, 100000, 100000, 200); /* waits for the first: too small */
  knnwb_cuda_gemm_start_wait();
  for (int device = 0; device < MAX(count, 1); device++) {
    g_assert_true(knnwb_cuda_gemm_known(device, 200000, 200000, 50) == expected);
    g_assert_false(knnwb_cuda_gemm_known(device, 100000, 100000, 200));
  }
  /* the ordinals given only; a query job's shape (K = 192) */
  const int first = 0;
  knnwb_cuda_gemm_start(&first, 1, 0, 1, 3000000, 140000, 129);
  knnwb_cuda_gemm_start_wait();
  g_assert_true(knnwb_cuda_gemm_known(0, 3000000, 140000, 129) == expected);
  if (count > 1)
    g_assert_false(knnwb_cuda_gemm_known(1, 3000000, 140000, 129));
  knnwb_cuda_gemm_start_wait(); /* nothing to wait for */
  /* begun from an input's header, then by the search of the same shape: the second joins the
   * first (it does not wait for it, nor start another), and the choice is made once */
  knnwb_cuda_gemm_start(NULL, 0, 0, 1, 250000, 250000, 300);
  knnwb_cuda_gemm_start(NULL, 0, 0, 1, 250000, 250000, 300);
  knnwb_cuda_gemm_start_wait();
  for (int device = 0; device < MAX(count, 1); device++)
    g_assert_true(knnwb_cuda_gemm_known(device, 250000, 250000, 300) == expected);
  /* a fresh cache has a line for each shape timed (one a GPU model) */
  g_autofree char *lines = NULL;
  if (dir != NULL && expected) {
    g_assert_true(g_file_get_contents(cache, &lines, NULL, NULL));
    g_assert_true(g_str_has_prefix(lines, "knnwb-gemm-1 "));
    g_autofree char *shape =
        g_strdup_printf(" %d %d ", knnwb_select_plan_first_tile(250000, 250000),
                        knnwb_select_plan_dpad(300, KNNWB_KERNELS_SCREEN_FP16));
    g_assert_nonnull(strstr(lines, shape));
  }
  if (dir != NULL) {
    g_remove(cache);
    g_rmdir(dir);
    g_unsetenv("KNNWB_CUDA_GEMM_CACHE");
  }
}

/* Rows uploaded ahead of a search (kernels/rows_start.cu) that no search takes: dropped once or
 * twice, replaced by the next start, begun for a GPU that does not exist; each drop waits for its
 * upload and frees it, so that nothing is left running or allocated (the sanitizer builds check
 * the host side). Without a GPU (CI) every upload fails on its own thread and is dropped the same
 * way; on a GPU they are uploaded and freed. */
static void test_rows_ahead_dropped(void)
{
  const size_t n = 4099, d = 37;
  float *rows = g_new(float, n *d);
  for (size_t i = 0; i < n * d; i++)
    rows[i] = (float)((i * 7919) % 1000) / 1000.0f;
  knnwb_cuda_rows_start(0, rows, n, d, 40.0);
  knnwb_cuda_rows_start_drop();
  knnwb_cuda_rows_start_drop(); /* nothing left */
  knnwb_cuda_rows_start(0, rows, n, d, 40.0);
  knnwb_cuda_rows_start(0, rows, n / 2, d, 40.0); /* drops the first */
  knnwb_cuda_rows_start(1 << 20, rows, n, d, 40.0);
  knnwb_cuda_rows_start(-1, rows, n, d, 40.0); /* no such ordinal: nothing begun */
  knnwb_cuda_rows_start(0, rows, 0, d, 40.0);  /* no rows: nothing begun */
  knnwb_cuda_rows_start_drop();
  g_free(rows);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/kernels/cuda-start/count", test_start_count);
  g_test_add_func("/kernels/cuda-start/gemm-choice-ahead", test_gemm_choice_ahead);
  g_test_add_func("/kernels/cuda-start/rows-ahead-dropped", test_rows_ahead_dropped);
  return g_test_run();
}
