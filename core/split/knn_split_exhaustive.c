/* The exhaustive round of a split-memory run (dense ties: rows whose screening window holds a large
 * part of all rows): every rank's pending rows go to every rank, each rank computes their exact k
 * best in its own reference block (knnwb_refine_row_exhaustive, by (distance, index)), the lists go
 * back to the rows' owners, and each owner merges its rows' R lists by (distance, index). The k
 * best of the whole reference are among the union of each block's k best, and every distance is
 * knnwb_prepared_distance of the same row statistics as in one process, so the lists are one
 * process's bytes. */
#include <math.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "split/split_internal.h"

/* Rank r's shared rows (view) against this rank's reference block: each row's k best
 * (knnwb_exhaustive_run: a few rows take the block in slices, one a thread), global numbers. */
static gboolean knnwb_split_block_best(const KnnwbSplitRows *rows, const KnnwbSplitShared *shared,
                                       const KnnwbPrepared *view, size_t r, KnnwbSplitLists *found,
                                       GError **error)
{
  const KnnwbSplitRun *run = rows->run;
  const KnnwbPrepared *reference = rows->reference;
  const size_t k = rows->k, lowest = rows->reference_first;
  int64_t *self_index = knnwb_try_new_array(MAX(view->n, (size_t)1), sizeof(int64_t),
                                            "the rows compared with every row", view->n, error);
  if (self_index == NULL)
    return FALSE;
  for (size_t t = 0; t < view->n; t++) {
    const size_t global = (size_t)shared->global[shared->start[r] + t];
    self_index[t] = rows->self && global >= lowest && global - lowest < reference->n
                        ? (int64_t)(global - lowest)
                        : -1;
  }
  /* invalid rows are left as they are: their owner empties their lists */
  const KnnwbExhaustiveJob job = {.query = view,
                                  .reference = reference,
                                  .self_index = self_index,
                                  .n_rows = view->n,
                                  .k = k,
                                  .out_index = found->index,
                                  .out_distance = found->distance,
                                  .threads = run->threads,
                                  .cancel = run->options->cancel};
  knnwb_exhaustive_run(&job); /* cancelled: the caller says so (knnwb_split_cancelled) */
  g_free(self_index);
  for (size_t c = 0; c < view->n * k; c++)
    if (found->index[c] >= 0)
      found->index[c] += (int64_t)lowest;
  return TRUE;
}

/* a comes before b by (distance, index), empty slots (index -1) last. */
static gboolean knnwb_split_entry_before(int64_t a_index, double a_distance, int64_t b_index,
                                         double b_distance)
{
  if (a_index < 0 || b_index < 0)
    return b_index < 0 && a_index >= 0;
  return a_distance < b_distance || (a_distance == b_distance && a_index < b_index);
}

/* The owner's merge: each own row's k best of the ranks' k-lists (each sorted, empty slots last),
 * written into its result list. */
typedef struct {
  const KnnwbSplitRows *rows;
  const int64_t *mine;
  const KnnwbSplitLists *back; /* one per rank */
  size_t ranks;
} KnnwbSplitBestMerge;

static void knnwb_split_best_merge_rows(size_t first, size_t last, void *user)
{
  KnnwbSplitBestMerge *merge = user;
  const KnnwbSplitRows *rows = merge->rows;
  const size_t k = rows->k;
  KnnwbNeighbors *result = rows->result;
  size_t *at = g_newa(size_t, merge->ranks);
  for (size_t t = first; t < last; t++) {
    const size_t i = (size_t)merge->mine[t];
    int64_t *out_index = result->indices + i * k;
    double *out_distance = result->distances + i * k;
    const gboolean invalid = rows->query->invalid != NULL && rows->query->invalid[i];
    for (size_t r = 0; r < merge->ranks; r++)
      at[r] = 0;
    for (size_t c = 0; c < k; c++) {
      /* The head of each rank's list (a used-up list: empty). */
      int64_t index = -1;
      double distance = INFINITY;
      size_t pick = 0;
      for (size_t r = 0; r < merge->ranks && !invalid; r++) {
        if (at[r] == k)
          continue;
        const size_t slot = t * k + at[r];
        if (knnwb_split_entry_before(merge->back[r].index[slot], merge->back[r].distance[slot],
                                     index, distance)) {
          index = merge->back[r].index[slot];
          distance = merge->back[r].distance[slot];
          pick = r;
        }
      }
      out_index[c] = index;
      out_distance[c] = index < 0 ? INFINITY : distance;
      if (index >= 0)
        at[pick]++;
    }
    result->n_found[i] = invalid ? 0 : (int32_t)k;
  }
}

/* One batch: the shared rows' k best in this rank's block, back to their owners, merged. */
static gboolean knnwb_split_exhaustive_batch(const KnnwbSplitRows *rows,
                                             const KnnwbSplitLayout *layout, const int64_t *mine,
                                             size_t count, GError **error)
{
  const KnnwbSplitRun *run = rows->run;
  const KnnwbKnnGroup *group = run->group;
  const size_t ranks = (size_t)group->size, k = rows->k;
  KnnwbSplitShared shared;
  gboolean ok = knnwb_split_share_rows(rows, layout, mine, count, &shared, error);
  KnnwbSplitLists *found = g_new0(KnnwbSplitLists, ranks);
  KnnwbSplitLists *back = g_new0(KnnwbSplitLists, ranks);
  gboolean local = ok;
  for (size_t r = 0; r < ranks && local; r++)
    local = knnwb_split_lists_init(&found[r], (size_t)shared.counts[r], k, run->threads, error) &&
            knnwb_split_lists_init(&back[r], count, k, run->threads, error);
  for (size_t r = 0; r < ranks && local; r++) {
    KnnwbPrepared view;
    knnwb_split_shared_view(&shared, layout, rows->query, r, &view);
    local = knnwb_split_block_best(rows, &shared, &view, r, &found[r], error);
  }
  local = local && !knnwb_split_cancelled(run, error);
  if (ok && !group->agree(group, local, error))
    ok = FALSE;
  ok = ok && knnwb_split_return_lists(group, &shared, found, count, k, back, error);
  if (ok) {
    KnnwbSplitBestMerge merge = {rows, mine, back, ranks};
    knnwb_parallel_for(run->threads, count, 256, knnwb_split_best_merge_rows, &merge);
  }
  for (size_t r = 0; r < ranks; r++) {
    knnwb_split_lists_clear(&found[r]);
    knnwb_split_lists_clear(&back[r]);
  }
  g_free(found);
  g_free(back);
  knnwb_split_shared_clear(&shared);
  return ok;
}

gboolean knnwb_split_exhaustive(const KnnwbSplitRows *rows, const int64_t *mine, size_t count,
                                GError **error)
{
  const KnnwbSplitRun *run = rows->run;
  const KnnwbSplitLayout layout =
      knnwb_split_layout(rows->query->metric, rows->query->scale_exponent, rows->query->d);
  /* A row costs its packed copy on every rank and a k-list from every rank (20 bytes an entry). */
  const size_t budget = run->options->memory_bytes ? run->options->memory_bytes : (size_t)256 << 20;
  const size_t row_bytes = knnwb_split_bytes(&layout, 1) + 2 * knnwb_split_lists_bytes(1, rows->k);
  const size_t batch = MAX((size_t)1, budget / row_bytes / (size_t)run->group->size);
  int64_t rounds = ((int64_t)count + (int64_t)batch - 1) / (int64_t)batch;
  gboolean ok = run->group->reduce(run->group, &rounds, 1, KNNWB_GROUP_MAX, error);
  for (int64_t round = 0; ok && round < rounds; round++) {
    const size_t at = MIN((size_t)round * batch, count);
    ok = knnwb_split_exhaustive_batch(rows, &layout, mine + at, MIN(batch, count - at), error);
  }
  return ok;
}
