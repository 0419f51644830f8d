/* Exact distances between rows of one matrix, computed as the kNN engine computes them (the same
 * preparation and formula, bit for bit): for callers that check or extend neighbour lists. */
#include "engine/engine.h"

struct KnnwbExactRows {
  KnnwbPrepared prepared;
};

KnnwbExactRows *knnwb_exact_rows_new(const KnnwbMatrix *data, KnnwbMetric metric, int n_threads,
                                     GError **error)
{
  KnnwbExactRows *rows = g_new0(KnnwbExactRows, 1);
  if (!knnwb_prepared_init(&rows->prepared, data, metric, FALSE, "data",
                           knnwb_thread_count(n_threads), NULL, NULL, error)) {
    g_free(rows);
    return NULL;
  }
  return rows;
}

double knnwb_exact_rows_distance(const KnnwbExactRows *rows, size_t i, size_t j)
{
  return knnwb_prepared_distance(&rows->prepared, i, &rows->prepared, j);
}

void knnwb_exact_rows_free(KnnwbExactRows *rows)
{
  if (rows == NULL)
    return;
  knnwb_prepared_clear(&rows->prepared);
  g_free(rows);
}
