/* A row's average ranks (the spearman metric's rows, and a row appended to a matrix that keeps
 * the ranks its reader took). */
#include <stdlib.h>
#include "base/base.h"

typedef struct {
  float value;
  size_t position;
} KnnwbRankItem;

static int knnwb_rank_item_compare(const void *a, const void *b)
{
  const KnnwbRankItem *x = a, *y = b;
  if (x->value != y->value)
    return x->value < y->value ? -1 : 1;
  return x->position < y->position ? -1 : (x->position > y->position);
}

void knnwb_row_ranks(const float *row, size_t d, float *ranks)
{
  KnnwbRankItem *items = g_new(KnnwbRankItem, d);
  for (size_t j = 0; j < d; j++)
    items[j] = (KnnwbRankItem){row[j], j};
  qsort(items, d, sizeof *items, knnwb_rank_item_compare);
  for (size_t start = 0; start < d;) {
    size_t end = start + 1;
    while (end < d && items[end].value == items[start].value)
      end++;
    /* Ranks 1-based; a tie group start..end-1 shares the average (start+1 + end) / 2, which is an
     * exact float for any d below 2^23. */
    float average = (float)((double)(start + 1 + end) / 2.0);
    for (size_t t = start; t < end; t++)
      ranks[items[t].position] = average;
    start = end;
  }
  g_free(items);
}
