/* The checks of a kNN request that need only its sizes (metric, k, shapes, the memory it would
 * take), before any data is read or prepared, so a bad request fails at once with its reason. */
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "engine/engine.h"

/* The checks; candidates: whether the search may hold candidate lists on the host (the tile
 * search on the CPU; GPUs refine theirs on the device, the k-d tree has none). */
static gboolean knnwb_knn_check_request(size_t n, size_t n_reference, size_t d, size_t d_reference,
                                        size_t held, size_t held_reference, gboolean self,
                                        const KnnwbKnnOptions *options, gboolean candidates,
                                        GError **error)
{
  if ((unsigned)options->metric >= KNNWB_METRIC_COUNT) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "unknown metric %d",
                (int)options->metric);
    return FALSE;
  }
  if (options->k < 1) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "k must be at least 1 (got %zu)",
                options->k);
    return FALSE;
  }
  if (d != d_reference) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "query rows have %zu column%s but reference rows have %zu", d, KNNWB_PLURAL(d),
                d_reference);
    return FALSE;
  }
  if (d == 1 && n > 0 &&
      (options->metric == KNNWB_METRIC_PEARSON || options->metric == KNNWB_METRIC_ABS_PEARSON ||
       options->metric == KNNWB_METRIC_SPEARMAN)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                "a correlation needs at least 2 columns but the rows have 1 (wrong delimiter, or "
                "should the matrix be transposed?)");
    return FALSE;
  }
  if (d == 0 && n > 0) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                "the rows have no columns: there is nothing to measure distances on");
    return FALSE;
  }
  const size_t k = options->k;
  /* Before the memory estimate, so that a k beyond the rows is reported as that and not as a
   * request for petabytes (dropped rows can only lower the bound; checked again below). */
  const size_t at_most = self ? (n > 0 ? n - 1 : 0) : n_reference;
  if (n > 0 && k > at_most && at_most == 0) {
    /* Not "use k <= 0": k is at least 1, so the input is what falls short. */
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                self ? "k = %zu but there is only one row: a kNN graph needs at least 2 rows"
                     : "k = %zu but the reference has no rows",
                k);
    return FALSE;
  }
  if (n > 0 && k > at_most) {
    g_set_error(
        error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
        "k = %zu but each row has only %zu %s row%s to choose neighbours from; use k <= %zu", k,
        at_most, self ? "other" : "reference", at_most == 1 ? "" : "s", at_most);
    return FALSE;
  }
  size_t result_cells;
  if (!knnwb_size_multiply(held, k, &result_cells) || result_cells > SIZE_MAX / sizeof(double)) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "%zu rows x k = %zu neighbours overflow the address space", held, k);
    return FALSE;
  }
  /* Refuse up front what cannot fit: the lists (index + distance), the prepared copy of the
   * rows and, on the CPU, the candidate lists of the first round. GPUs refine their candidates
   * to the k best on the device, so the host's room for them stays untouched and takes no
   * memory (counting it refused 10^8 rows of 50 columns at k = 30 on a 128 GB host). Working tiles
   * come on top but are bounded by the memory budget. Whether GPUs will run is asked without
   * waiting for their driver: a run that ends up on the CPU after all reports the candidates'
   * allocation if it fails. */
  const size_t margin = MAX((size_t)8, k / 8);
  const double candidate_bytes =
      !candidates || knnwb_knn_expects_gpu(options)
          ? 0.0
          : (double)held * (double)(k + margin) * (sizeof(int64_t) + sizeof(float));
  double needed = (double)held * (double)k * (sizeof(int64_t) + sizeof(double)) + candidate_bytes +
                  (double)(held + (self ? 0 : held_reference)) * (double)d * sizeof(float) *
                      (options->metric == KNNWB_METRIC_SPEARMAN ? 2.0 : 1.0);
  size_t available = knnwb_memory_available();
  if (needed > (double)available) {
    g_autofree char *needed_text = knnwb_memory_format((size_t)MIN(needed, (double)SIZE_MAX));
    g_autofree char *available_text = knnwb_memory_format(available);
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "a kNN graph of %zu rows with k = %zu needs about %s of memory but only %s is "
                "available: lower k, or run on a machine with more memory",
                n, k, needed_text, available_text);
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_knn_check_available(size_t k, size_t available, size_t n_valid, size_t n_reference,
                                   gboolean self, GError **error)
{
  if (k <= available)
    return TRUE;
  const size_t absent = n_reference - n_valid;
  g_autofree char *why =
      absent > 0
          ? g_strdup_printf(" (%zu of the %zu%s rows %s absent: rows with missing values, or "
                            "constant rows dropped)",
                            absent, n_reference, self ? "" : " reference",
                            absent == 1 ? "is" : "are")
          : g_strdup("");
  if (available == 0)
    /* Not "use k <= 0": k is at least 1, so the input is what falls short. */
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                self ? "k = %zu but only %zu row holds values%s: a kNN graph needs at least 2"
                     : "k = %zu but %zu reference rows hold values%s",
                k, n_valid, why);
  else
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "k = %zu but each row has only %zu %s row%s to choose neighbours from%s; use k <= "
                "%zu",
                k, available, self ? "other" : "reference", available == 1 ? "" : "s", why,
                available);
  return FALSE;
}

gboolean knnwb_knn_check_sizes(size_t n, size_t n_reference, size_t d, size_t d_reference,
                               size_t held, size_t held_reference, gboolean self,
                               const KnnwbKnnOptions *options, GError **error)
{
  return knnwb_knn_check_request(n, n_reference, d, d_reference, held, held_reference, self,
                                 options, TRUE, error);
}

gboolean knnwb_knn_check_sizes_tree(size_t n, size_t n_reference, size_t d, size_t d_reference,
                                    size_t held, size_t held_reference, gboolean self,
                                    const KnnwbKnnOptions *options, GError **error)
{
  return knnwb_knn_check_request(n, n_reference, d, d_reference, held, held_reference, self,
                                 options, FALSE, error);
}
