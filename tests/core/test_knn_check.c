/* The up-front memory check of a kNN request (core/engine/knn_check.c): it refuses what cannot
 * fit, and counts the first round's candidate lists only where the CPU holds them. GPUs refine
 * their candidates on the device, so a request whose lists and rows fit is not refused for a
 * room that would stay untouched (10^8 rows of 50 columns at k = 30 were refused on a 128 GB
 * host). The sizes are chosen from the memory this process may use now, so the test holds on
 * any machine. */
#include <string.h>
#include <knnwb/knnwb.h>
#include "engine/engine.h"

/* Whether n rows of d columns at k pass the check with backend (self search, pearson). */
static gboolean passes(size_t n, size_t d, size_t k, KnnwbBackend backend, GError **error)
{
  KnnwbKnnOptions options;
  knnwb_knn_options_init(&options);
  options.k = k;
  options.backend = backend;
  return knnwb_knn_check_sizes(n, n, d, d, n, n, TRUE, &options, error);
}

static void test_candidates_cpu_only(void)
{
  const size_t available = knnwb_memory_available();
  const size_t d = 4, k = 30;
  /* per row: lists k x 16 bytes and the prepared row 4 d; the CPU's candidates (k + 8) x 12 */
  const double lists_and_row = (double)k * 16 + (double)d * 4;
  const double candidates = (double)(k + 8) * 12;
  /* lists and rows take 60% of what is available, with the candidates 115% */
  const size_t n = (size_t)(0.6 * (double)available / lists_and_row);
  g_assert_cmpfloat((double)n * (lists_and_row + candidates), >, 1.1 * (double)available);

  g_autoptr(GError) error = NULL;
  g_assert_false(passes(n, d, k, KNNWB_BACKEND_CPU, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY);
  g_assert_nonnull(strstr(error->message, "needs about"));
  g_clear_error(&error);
  /* the cuda backend is known to run on GPUs without asking the driver: no candidates counted */
  g_assert_true(passes(n, d, k, KNNWB_BACKEND_CUDA, &error));
  g_assert_no_error(error);
  /* lists and rows beyond what is available are refused on GPUs too */
  g_assert_false(passes(2 * n, d, k, KNNWB_BACKEND_CUDA, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/knn-check/candidates-cpu-only", test_candidates_cpu_only);
  return g_test_run();
}
