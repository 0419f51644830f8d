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

/* per row at k = 30, d = 4: lists k x 16 bytes and the prepared row 4 d; the CPU's candidates
 * (k + 8) x 12 */
enum { D = 4, K = 30 };
static const double lists_and_row = (double)K * 16 + (double)D * 4;
static const double candidates = (double)(K + 8) * 12;

/* Rows whose lists and prepared rows take fraction of the memory available right now: measured
 * just before each check, so that memory other processes take or give back meanwhile (tests run
 * side by side) cannot move the outcome; each fraction stays 30% or more from the limit. */
static size_t rows_taking(double fraction)
{
  return (size_t)(fraction * (double)knnwb_memory_available() / lists_and_row);
}

static void test_candidates_cpu_only(void)
{
  /* 70% of what is available without the candidates, 134% with them */
  g_assert_cmpfloat(0.7 * (lists_and_row + candidates) / lists_and_row, >, 1.3);
  g_autoptr(GError) error = NULL;
  g_assert_false(passes(rows_taking(0.7), D, K, KNNWB_BACKEND_CPU, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY);
  g_assert_nonnull(strstr(error->message, "needs about"));
  g_clear_error(&error);
  /* the cuda backend is known to run on GPUs without asking the driver: no candidates counted */
  g_assert_true(passes(rows_taking(0.7), D, K, KNNWB_BACKEND_CUDA, &error));
  g_assert_no_error(error);
  /* lists and rows beyond what is available are refused on GPUs too */
  g_assert_false(passes(rows_taking(1.4), D, K, KNNWB_BACKEND_CUDA, &error));
  g_assert_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/knn-check/candidates-cpu-only", test_candidates_cpu_only);
  return g_test_run();
}
