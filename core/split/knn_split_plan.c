/*
 * The first pass's candidates per row for split ranks: the margin planner (core/engine/margin.c)
 * over blocks. Under a half-precision screen the fixed margin past k is far too short on
 * clustered rows (euclidean's window grows with the rows' norms), and then nearly every row
 * fails its certificate and is selected again against every block. One process samples its rows'
 * distances to every row first; split ranks hold one block each, so:
 *
 *   1. the sample rows are one process's (knnwb_margin_sample_rows over the whole rows), each
 *      rank taking those of its block, and every rank's sample rows travel to every rank (32 rows
 *      in all, so a rank's share of this work falls with the ranks as its threads do);
 *   2. each rank builds every sample row's heap of its smallest distances against its own
 *      reference block;
 *   3. the heaps go back to the rows' owners, which merge them (the keep smallest of each block's
 *      keep smallest are the whole's) and count their rows' windows;
 *   4. every rank's counts are gathered and every rank takes the plan of all of them
 *      (knnwb_margin_rule), as one process does of its counts.
 *
 * So the counts and the plan are one process's knnwb_margin_choose on the whole rows, bit for bit,
 * when the blocks are prepared as one process prepares the rows (the euclidean frame's column sums,
 * added block by block, may differ from one process's in their last bits; the counts are then
 * estimates of the same). The lists are exact whatever the count: only the number of rows selected
 * again depends on it.
 */
#include <string.h>
#include <knnwb/error.h>
#include "group/group.h"
#include "split/split_internal.h"

/* Every rank's sample rows, scored and with their squared norms, one after another (rank by rank),
 * as a prepared set the heaps read (scored and sqnorms only), and their numbers in the run. */
typedef struct {
  KnnwbPrepared rows;
  float *scored, *sqnorms;
  size_t *index, *ids;
} KnnwbSplitSamples;

static void knnwb_split_samples_init(KnnwbSplitSamples *samples, const KnnwbSplitShared *shared,
                                     const KnnwbSplitLayout *layout, const KnnwbPrepared *like)
{
  const size_t d = like->d, total = shared->total;
  samples->rows = *like;
  samples->rows.n = total;
  samples->scored = g_new(float, MAX(total * d, (size_t)1));
  samples->sqnorms = like->sqnorms != NULL ? g_new(float, MAX(total, (size_t)1)) : NULL;
  samples->index = g_new(size_t, MAX(total, (size_t)1));
  samples->ids = g_new(size_t, MAX(total, (size_t)1));
  for (size_t r = 0; r < shared->ranks; r++) {
    KnnwbPrepared view;
    knnwb_split_shared_view(shared, layout, like, r, &view);
    const size_t at = shared->start[r];
    knnwb_prepared_scored_rows(&view, 0, view.n, samples->scored + at * d);
    if (samples->sqnorms != NULL)
      memcpy(samples->sqnorms + at, view.sqnorms, view.n * sizeof(float));
  }
  for (size_t s = 0; s < total; s++) {
    samples->index[s] = s;
    samples->ids[s] = (size_t)shared->global[s];
  }
  samples->rows.scored = samples->scored;
  samples->rows.sqnorms = samples->sqnorms;
}

static void knnwb_split_samples_clear(KnnwbSplitSamples *samples)
{
  g_free(samples->scored);
  g_free(samples->sqnorms);
  g_free(samples->index);
  g_free(samples->ids);
}

/* Every sample row's heap (its size, then keep distances: keep + 1 doubles) back to the rank the
 * row came from; this rank's own rows' heaps from every rank merged into heap and size (count
 * rows). Collective; errors: the group's transport. */
static gboolean knnwb_split_plan_heaps_back(const KnnwbKnnGroup *group,
                                            const KnnwbSplitShared *shared, size_t keep,
                                            const double *heaps, const size_t *sizes, size_t count,
                                            double *heap, size_t *size, GError **error)
{
  const size_t ranks = shared->ranks, stride = keep + 1;
  g_autofree double *out = g_new(double, MAX(shared->total * stride, (size_t)1));
  g_autofree double *in = g_new(double, MAX(ranks * count * stride, (size_t)1));
  g_autofree const void **send = g_new(const void *, ranks);
  g_autofree void **receive = g_new(void *, ranks);
  g_autofree size_t *send_bytes = g_new(size_t, ranks);
  g_autofree size_t *receive_bytes = g_new(size_t, ranks);
  for (size_t s = 0; s < shared->total; s++) {
    out[s * stride] = (double)sizes[s];
    memcpy(out + s * stride + 1, heaps + s * keep, sizes[s] * sizeof(double));
  }
  for (size_t r = 0; r < ranks; r++) {
    send[r] = out + shared->start[r] * stride;
    send_bytes[r] = (size_t)shared->counts[r] * stride * sizeof(double);
    receive[r] = in + r * count * stride;
    receive_bytes[r] = count * stride * sizeof(double);
  }
  if (!group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error))
    return FALSE;
  memset(size, 0, count * sizeof(size_t));
  for (size_t r = 0; r < ranks; r++)
    for (size_t s = 0; s < count; s++) {
      const double *from = in + (r * count + s) * stride;
      knnwb_margin_heap_add(heap + s * keep, &size[s], keep, from + 1, (size_t)from[0]);
    }
  return TRUE;
}

/* Steps 1-3 for a plan's sizes: this rank's sample rows' counts in needed (count rows), and
 * whether its heaps were cut short by the run's cancel flag (*cancelled). Collective; errors: the
 * group's transport. */
static gboolean knnwb_split_plan_mine(const KnnwbSplitRows *rows, const KnnwbMarginPlan *plan,
                                      const size_t *local, size_t count, size_t *needed,
                                      gboolean *cancelled, GError **error)
{
  const KnnwbSplitRun *run = rows->run;
  const KnnwbPrepared *query = rows->query;
  const KnnwbSplitLayout layout =
      knnwb_split_layout(query->metric, query->scale_exponent, query->d);
  g_autofree int64_t *numbers = g_new(int64_t, MAX(count, (size_t)1));
  for (size_t s = 0; s < count; s++)
    numbers[s] = (int64_t)local[s];
  KnnwbSplitShared shared;
  if (!knnwb_split_share_rows(rows, &layout, numbers, count, &shared, error)) {
    knnwb_split_shared_clear(&shared);
    return FALSE;
  }
  KnnwbSplitSamples samples;
  knnwb_split_samples_init(&samples, &shared, &layout, query);
  const size_t keep = plan->keep;
  g_autofree double *heaps = g_new(double, MAX(shared.total * keep, (size_t)1));
  g_autofree size_t *sizes = g_new0(size_t, MAX(shared.total, (size_t)1));
  /* (cancelled: the heaps still travel, every rank keeps the screen's count) */
  *cancelled = !knnwb_margin_heaps(&samples.rows, samples.index, samples.ids, shared.total,
                                   rows->reference, rows->reference_first, rows->self, keep,
                                   run->threads, run->options->cancel, heaps, sizes);
  knnwb_split_samples_clear(&samples);
  g_autofree double *heap = g_new(double, MAX(count * keep, (size_t)1));
  g_autofree size_t *size = g_new0(size_t, MAX(count, (size_t)1));
  const gboolean ok = knnwb_split_plan_heaps_back(run->group, &shared, keep, heaps, sizes, count,
                                                  heap, size, error);
  knnwb_split_shared_clear(&shared);
  if (ok)
    (void)knnwb_margin_decide(query, local, count, rows->reference, plan, heap, size, needed);
  return ok;
}

gboolean knnwb_split_plan(const KnnwbSplitRows *rows, size_t n_query, size_t max_kc, size_t *kc,
                          size_t *needed, GError **error)
{
  const KnnwbSplitRun *run = rows->run;
  const KnnwbKnnGroup *group = run->group;
  const KnnwbPrepared *query = rows->query;
  /* (the ranks say together whether to plan, and take the smallest memory cap) */
  int64_t v[2] = {knnwb_margin_wanted(query->screen, query->metric, n_query) && rows->k > 0,
                  (int64_t)MIN(max_kc, (size_t)INT64_MAX)};
  if (!group->reduce(group, v, 2, KNNWB_GROUP_MIN, error))
    return FALSE;
  if (v[0] == 0)
    return TRUE;
  const gint64 start = g_get_monotonic_time();
  const KnnwbMarginPlan plan = knnwb_margin_plan(rows->k, *kc, rows->available, (size_t)v[1]);
  /* One process's sample over the whole rows; each rank takes those of its block, so the ranks
   * score KNNWB_MARGIN_SAMPLE rows in all (not as many a rank: that work grew with the ranks). */
  const size_t total = MIN((size_t)KNNWB_MARGIN_SAMPLE, n_query);
  size_t all[KNNWB_MARGIN_SAMPLE], local[KNNWB_MARGIN_SAMPLE], counts[KNNWB_MARGIN_SAMPLE];
  knnwb_margin_sample_rows(0, n_query, total, all);
  size_t count = 0;
  for (size_t s = 0; s < total; s++)
    if (all[s] >= rows->query_first && all[s] - rows->query_first < query->n)
      local[count++] = all[s] - rows->query_first;
  size_t *mine = needed ? needed : counts, chosen = *kc;
  gboolean cancelled = FALSE;
  if (!knnwb_split_plan_mine(rows, &plan, local, count, mine, &cancelled, error) ||
      !knnwb_margin_rule_group(group, &plan, mine, count, &chosen, error))
    return FALSE;
  int64_t stop = cancelled;
  if (!group->reduce(group, &stop, 1, KNNWB_GROUP_MAX, error))
    return FALSE;
  if (stop) { /* (the first pass stops at its first step) */
    if (needed != NULL)
      memset(needed, 0, count * sizeof(size_t));
    return TRUE;
  }
  g_debug("knnwb: margin planner: rank %d: %zu sample rows (%zu of them this rank's), %zu "
          "candidates per row (the screen's %zu), %.3f s",
          group->rank, total, count, chosen, *kc, (double)(g_get_monotonic_time() - start) / 1e6);
  *kc = MAX(*kc, chosen);
  return TRUE;
}
