/* The re-selection of a split-memory run: the rows the first pass's bound cannot certify
 * (knn_split_best.c) selected again with more candidates against every rank's reference block,
 * each row's candidates refined into its exact, certified list (knnwb_refine_row, after the exact
 * distances the selection left to it): knnwb_split_retry, one round of core's certify loop that
 * knnwb_knn_split_run runs. */
#include <math.h>
#include <knnwb/parallel.h>
#include "split/split_internal.h"

/* Refines the own rows listed (rows: local numbers, NULL = all count from 0) from their
 * candidates; uncertified local rows are appended to *left. */
typedef struct {
  const KnnwbPrepared *query, *reference;
  gboolean self;
  size_t k, available, first, reference_first;
  const int64_t *rows;
  const KnnwbSplitLists *lists;
  KnnwbNeighbors *result;
  unsigned char *uncertified;
} KnnwbSplitRefine;

/* The distances left NaN (candidates of the own reference block, knnwb_split_finish_as) of list
 * t (own row i), as knnwb_refine_row would want them: those of the k best by score (the list is
 * sorted), whose largest, kth, bounds the k-th exact distance from above, then of the others whose
 * lower bound does not exceed kth. The rest become +inf: each is farther than the k-th, so it
 * could not be among the k kept, and the certificate reads the worst score and the k-th distance
 * only: the output is what computing them all would give, with about k distances a row instead of
 * kc. */
static void knnwb_split_complete_row(const KnnwbSplitRefine *refine, size_t i, size_t t)
{
  const size_t kc = refine->lists->kc, first = refine->reference_first;
  const int64_t self_index = refine->self ? (int64_t)(refine->first + i) : -1;
  const int64_t *index = refine->lists->index + t * kc;
  const float *score = refine->lists->score + t * kc;
  double *distance = refine->lists->distance + t * kc;
  double kth = -INFINITY;
  size_t seen = 0;
  for (size_t c = 0; c < kc; c++) {
    if (index[c] < 0 || index[c] == self_index)
      continue;
    const gboolean best = seen++ < refine->k;
    if (isnan(distance[c]) && (size_t)index[c] >= first &&
        (size_t)index[c] - first < refine->reference->n) {
      if (!best && knnwb_refine_lower_bound(refine->query, i, refine->reference, score[c]) > kth) {
        distance[c] = INFINITY;
        continue;
      }
      if (c + 1 < kc && index[c + 1] >= 0 && (size_t)index[c + 1] >= first &&
          (size_t)index[c + 1] - first < refine->reference->n)
        knnwb_split_prefetch(refine->reference, (size_t)index[c + 1] - first);
      distance[c] =
          knnwb_prepared_distance(refine->query, i, refine->reference, (size_t)index[c] - first);
    }
    if (best)
      kth = MAX(kth, distance[c]);
  }
}

static void knnwb_split_refine_rows(size_t first, size_t last, void *user)
{
  KnnwbSplitRefine *refine = user;
  const size_t k = refine->k, kc = refine->lists->kc;
  KnnwbRefineScratch scratch = {0};
  for (size_t t = first; t < last; t++) {
    const size_t i = refine->rows ? (size_t)refine->rows[t] : t;
    int64_t *out_index = refine->result->indices + i * k;
    double *out_distance = refine->result->distances + i * k;
    refine->uncertified[t] = 0;
    if (refine->query->invalid != NULL && refine->query->invalid[i]) {
      for (size_t r = 0; r < k; r++) {
        out_index[r] = -1;
        out_distance[r] = INFINITY;
      }
      refine->result->n_found[i] = 0;
      continue;
    }
    knnwb_split_complete_row(refine, i, t);
    gboolean ok = knnwb_refine_row(refine->query, i, refine->reference,
                                   refine->self ? (int64_t)(refine->first + i) : -1,
                                   refine->lists->index + t * kc, refine->lists->score + t * kc,
                                   refine->lists->distance + t * kc, kc, refine->available, k,
                                   &scratch, out_index, out_distance);
    refine->result->n_found[i] = (int32_t)k;
    refine->uncertified[t] = ok ? 0 : 1;
  }
  knnwb_refine_scratch_clear(&scratch);
}

/* Refines count rows of refine into refine->result; the local numbers of the rows left uncertified
 * are appended to left. About k exact distances a row, on run->threads. */
static void knnwb_split_refine(const KnnwbSplitRun *run, KnnwbSplitRefine *refine, size_t count,
                               GArray *left)
{
  refine->uncertified = g_malloc0(MAX(count, (size_t)1));
  knnwb_parallel_for(run->threads, count, 256, knnwb_split_refine_rows, refine);
  for (size_t t = 0; t < count; t++)
    if (refine->uncertified[t]) {
      int64_t i = refine->rows ? refine->rows[t] : (int64_t)t;
      g_array_append_val(left, i);
    }
  g_clear_pointer(&refine->uncertified, g_free);
}

/* Rank r's shared rows selected against this rank's reference block into found (kc wide: the
 * job's narrower lists widened). The own rows' distances are left to the refinement (which needs
 * about k of them). */
static gboolean knnwb_split_retry_select(const KnnwbSplitRows *rows, const KnnwbSplitShared *shared,
                                         const KnnwbSplitLayout *layout, size_t r,
                                         KnnwbSplitLists *found, GError **error)
{
  const KnnwbSplitRun *run = rows->run;
  const size_t kc = run->kc;
  const KnnwbSplitSide own_reference = {rows->reference, 0, rows->reference->n,
                                        rows->reference_first};
  const size_t valid = knnwb_split_valid(&own_reference);
  KnnwbPrepared view;
  knnwb_split_shared_view(shared, layout, rows->query, r, &view);
  const KnnwbSplitSide theirs = {&view, 0, view.n, 0};
  if (!knnwb_split_lists_init(found, view.n, kc, run->threads, error))
    return FALSE;
  if (valid == 0 || view.n == 0)
    return TRUE;
  KnnwbSelectJob job;
  knnwb_split_fill_job(run, &job, &theirs, &own_reference, MIN(kc, valid), found);
  if (!knnwb_split_run_job(run, &job, &theirs, &own_reference, error))
    return FALSE;
  KnnwbSplitLists narrow = *found;
  narrow.kc = job.kc;
  knnwb_split_finish_as(run, &theirs, &own_reference, &narrow, r != (size_t)run->group->rank);
  /* Widen in place from the back: row t's job.kc entries move to t * kc. */
  for (size_t t = view.n; t-- > 0;)
    for (size_t c = kc; c-- > 0;) {
      const gboolean kept = c < job.kc;
      const size_t from = t * job.kc + c, to = t * kc + c;
      found->index[to] = kept ? narrow.index[from] : -1;
      found->distance[to] = kept ? narrow.distance[from] : NAN;
      found->score[to] = kept ? narrow.score[from] : INFINITY;
    }
  return TRUE;
}

/* One batch of a re-selection round: every rank's rows go to every rank, each selects them against
 * its own reference block, the candidates come back, and each rank refines its rows. */
static gboolean knnwb_split_retry_batch(const KnnwbSplitRows *rows, const KnnwbSplitLayout *layout,
                                        const int64_t *mine, size_t count, GArray *left,
                                        GError **error)
{
  const KnnwbKnnGroup *group = rows->run->group;
  const size_t ranks = (size_t)group->size, kc = rows->run->kc;
  KnnwbSplitShared shared;
  gint64 since = g_get_monotonic_time();
  gboolean ok = knnwb_split_share_rows(rows, layout, mine, count, &shared, error);
  knnwb_split_mark(group, "re-selection: rows shared", &since);
  KnnwbSplitLists *found = g_new0(KnnwbSplitLists, ranks);
  KnnwbSplitLists *back = g_new0(KnnwbSplitLists, ranks);
  gboolean local = ok;
  for (size_t r = 0; r < ranks && local; r++)
    local = knnwb_split_retry_select(rows, &shared, layout, r, &found[r], error);
  knnwb_split_mark(group, "re-selection: selected", &since);
  for (size_t r = 0; r < ranks && local; r++)
    local = knnwb_split_lists_init(&back[r], count, kc, rows->run->threads, error);
  if (ok && !group->agree(group, local, error))
    ok = FALSE;
  ok = ok && knnwb_split_return_lists(group, &shared, found, count, kc, back, error);
  knnwb_split_mark(group, "re-selection: candidates returned", &since);
  if (ok) {
    KnnwbSplitLists merged;
    local = knnwb_split_lists_init(&merged, count, kc, rows->run->threads, error);
    for (size_t r = 0; r < ranks && local; r++)
      knnwb_split_merge(&merged, &back[r], 0, rows->run->threads);
    knnwb_split_mark(group, "re-selection: merged", &since);
    if (local) {
      KnnwbSplitRefine refine = {rows->query,
                                 rows->reference,
                                 rows->self,
                                 rows->k,
                                 rows->available,
                                 rows->query_first,
                                 rows->reference_first,
                                 mine,
                                 &merged,
                                 rows->result,
                                 NULL};
      knnwb_split_refine(rows->run, &refine, count, left);
      knnwb_split_lists_clear(&merged);
      knnwb_split_mark(group, "re-selection: refined", &since);
    }
    ok = group->agree(group, local, error);
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

/*
 * Re-selects the uncertified own rows with kc candidates, in batches whose candidate lists fit the
 * memory budget. Collective: every rank calls it while any rank has rows left, and the ranks run
 * as many batches as the one with the most rows.
 */
gboolean knnwb_split_retry(const KnnwbSplitRows *rows, const int64_t *mine, size_t count,
                           GArray *left, GError **error)
{
  const KnnwbSplitRun *run = rows->run;
  const KnnwbSplitLayout layout =
      knnwb_split_layout(rows->query->metric, rows->query->scale_exponent, rows->query->d);
  const size_t batch =
      knnwb_certify_batch_rows(run->options->memory_bytes, run->kc, (size_t)run->group->size);
  int64_t rounds = ((int64_t)count + (int64_t)batch - 1) / (int64_t)batch;
  gboolean ok = run->group->reduce(run->group, &rounds, 1, KNNWB_GROUP_MAX, error);
  for (int64_t round = 0; ok && round < rounds; round++) {
    const size_t at = MIN((size_t)round * batch, count);
    ok = knnwb_split_retry_batch(rows, &layout, mine + at, MIN(batch, count - at), left, error);
  }
  return ok;
}
