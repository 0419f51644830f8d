/* The shared frame of a split-memory run: what preparing any row needs from all rows (euclidean:
 * the reference rows' column means and scale; manhattan: the scale of every row), reduced over the
 * ranks so that each rank prepares its block as one process would prepare the whole matrix. */
#include <math.h>
#include <string.h>
#include "split/split_internal.h"

int64_t knnwb_split_double_bits(double value)
{
  int64_t bits;
  memcpy(&bits, &value, sizeof bits);
  return bits; /* for value >= 0 the order of the bits is the order of the values */
}

double knnwb_split_bits_double(int64_t bits)
{
  double value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

/*
 * The shared frame of the run (euclidean: column means and scale of the reference rows; manhattan:
 * the scale of every row): the same on every rank. Column sums are added per block, then over the
 * blocks in rank order.
 */
gboolean knnwb_split_frame(const KnnwbKnnGroup *group, const KnnwbMatrix *query,
                           const KnnwbMatrix *reference, size_t n_reference, KnnwbMetric metric,
                           KnnwbPrepared *frame, GError **error)
{
  memset(frame, 0, sizeof *frame);
  const size_t d = reference->n_cols, ranks = (size_t)group->size;
  if (metric == KNNWB_METRIC_MANHATTAN) {
    int64_t exponent = MAX(knnwb_prepare_manhattan_exponent(reference),
                           query ? knnwb_prepare_manhattan_exponent(query) : 0);
    if (!group->reduce(group, &exponent, 1, KNNWB_GROUP_MAX, error))
      return FALSE;
    frame->scale_exponent = (int)exponent;
    return TRUE;
  }
  if (metric != KNNWB_METRIC_EUCLIDEAN)
    return TRUE;
  g_autofree double *sums = g_new0(double, MAX(d, (size_t)1));
  g_autofree double *all = g_new0(double, MAX(ranks * d, (size_t)1));
  for (size_t i = 0; i < reference->n_rows; i++)
    for (size_t j = 0; j < d; j++)
      sums[j] += reference->values[i * d + j];
  g_autofree const void **send = g_new(const void *, ranks);
  g_autofree size_t *bytes = g_new(size_t, ranks);
  g_autofree void **receive = g_new(void *, ranks);
  for (size_t r = 0; r < ranks; r++) {
    send[r] = sums;
    bytes[r] = d * sizeof(double);
    receive[r] = all + r * d;
  }
  if (!group->exchange(group, send, bytes, (void *const *)receive, bytes, error))
    return FALSE;
  frame->column_mean = g_new0(double, MAX(d, (size_t)1));
  for (size_t j = 0; j < d; j++) {
    for (size_t r = 0; r < ranks; r++)
      frame->column_mean[j] += all[r * d + j];
    if (n_reference > 0)
      frame->column_mean[j] /= (double)n_reference;
  }
  double largest = 0.0;
  for (size_t i = 0; i < reference->n_rows; i++)
    for (size_t j = 0; j < d; j++)
      largest = MAX(largest, fabs((double)reference->values[i * d + j] - frame->column_mean[j]));
  int64_t bits = knnwb_split_double_bits(largest);
  if (!group->reduce(group, &bits, 1, KNNWB_GROUP_MAX, error))
    return FALSE;
  largest = knnwb_split_bits_double(bits);
  frame->scale_exponent = largest > 0.0 ? ilogb(largest) : 0;
  return TRUE;
}
