/* The end of a split-memory run: each own row's candidates refined into its exact, certified list
 * (knnwb_refine_row, after the exact distances the passes left to it), and the rows the bound
 * cannot certify selected again with more candidates against every rank's reference block
 * (knnwb_split_retry; knnwb_knn_split_run repeats the rounds until every row is certified). */
#include <math.h>
#include "knn_split_internal.h"

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

void knnwb_split_refine(const KnnwbSplitRun *run, KnnwbSplitRefine *refine, size_t count,
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

/*
 * Re-selects the uncertified own rows (local numbers in *left, which is replaced by those still
 * uncertified) with kc candidates: every rank's rows go to every rank, each selects them against
 * its own reference block, and the candidates come back. Collective: every rank calls it while
 * any rank has rows left, in batches whose candidate lists fit the memory budget.
 */
gboolean knnwb_split_retry(const KnnwbSplitRun *run, const KnnwbPrepared *query,
                           const unsigned char *query_invalid, size_t query_first,
                           const KnnwbPrepared *reference, size_t reference_first, gboolean self,
                           size_t k, size_t available, KnnwbNeighbors *result, GArray **left,
                           GError **error)
{
  const KnnwbKnnGroup *group = run->group;
  const size_t ranks = (size_t)group->size, kc = run->kc;
  const KnnwbSplitLayout layout =
      knnwb_split_layout(query->metric, query->scale_exponent, query->d);
  const size_t budget = run->options->memory_bytes ? run->options->memory_bytes : (size_t)256 << 20;
  const size_t batch =
      MAX((size_t)1, budget / (kc * (sizeof(int64_t) + sizeof(float) + sizeof(double))) / ranks);
  GArray *rows = *left;
  *left = g_array_new(FALSE, FALSE, sizeof(int64_t));
  int64_t rounds = ((int64_t)rows->len + (int64_t)batch - 1) / (int64_t)batch;
  gboolean ok = group->reduce(group, &rounds, 1, KNNWB_GROUP_MAX, error);
  g_autofree const void **send = g_new0(const void *, ranks);
  g_autofree size_t *send_bytes = g_new0(size_t, ranks);
  g_autofree void **receive = g_new0(void *, ranks);
  g_autofree size_t *receive_bytes = g_new0(size_t, ranks);
  g_autofree int64_t *counts = g_new0(int64_t, ranks);
  g_autofree int64_t *all_counts = g_new0(int64_t, ranks);
  KnnwbSplitSide own_reference = {reference, 0, reference->n, reference_first};
  for (int64_t round = 0; ok && round < rounds; round++) {
    const size_t at = MIN((size_t)round * batch, (size_t)rows->len);
    const size_t count = MIN(batch, (size_t)rows->len - at);
    const int64_t *mine = (const int64_t *)(void *)rows->data + at;
    /* Every rank learns every rank's count, then the rows. */
    for (size_t r = 0; r < ranks; r++) {
      counts[r] = (int64_t)count;
      send[r] = &counts[r];
      send_bytes[r] = sizeof(int64_t);
      receive[r] = &all_counts[r];
      receive_bytes[r] = sizeof(int64_t);
    }
    if (!(ok = group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes,
                               error)))
      break;
    char *packed = g_malloc(MAX(knnwb_split_bytes(&layout, count), (size_t)1));
    knnwb_split_pack(&layout, query, query_invalid, mine, count, packed);
    char **gathered = g_new0(char *, ranks);
    for (size_t r = 0; r < ranks; r++) {
      gathered[r] = g_malloc(MAX(knnwb_split_bytes(&layout, (size_t)all_counts[r]), (size_t)1));
      send[r] = packed;
      send_bytes[r] = knnwb_split_bytes(&layout, count);
      receive[r] = gathered[r];
      receive_bytes[r] = knnwb_split_bytes(&layout, (size_t)all_counts[r]);
    }
    ok = group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error);
    g_free(packed);
    /* Each rank's rows against this rank's reference block. */
    KnnwbSplitLists *found = g_new0(KnnwbSplitLists, ranks);
    const size_t valid = knnwb_split_valid(&own_reference);
    gboolean local = ok;
    for (size_t r = 0; r < ranks && local; r++) {
      KnnwbPrepared view;
      knnwb_split_view(&layout, query, gathered[r], (size_t)all_counts[r], &view);
      KnnwbSplitSide theirs = {&view, 0, view.n, 0};
      local = knnwb_split_lists_init(&found[r], view.n, kc, error);
      if (local && valid > 0 && view.n > 0) {
        KnnwbSelectJob job;
        knnwb_split_fill_job(run, &job, &theirs, &own_reference, MIN(kc, valid), &found[r]);
        local = knnwb_split_run_job(run, &job, error);
        KnnwbSplitLists narrow = found[r];
        narrow.kc = job.kc;
        if (local) {
          /* The own rows' distances are left to the refinement (which needs about k of them). */
          knnwb_split_finish_as(run, &theirs, &own_reference, &narrow, r != (size_t)group->rank);
          /* Widen in place from the back: row t's job.kc entries move to t * kc. */
          for (size_t t = view.n; t-- > 0;)
            for (size_t c = kc; c-- > 0;) {
              const gboolean kept = c < job.kc;
              const size_t from = t * job.kc + c, to = t * kc + c;
              found[r].index[to] = kept ? narrow.index[from] : -1;
              found[r].distance[to] = kept ? narrow.distance[from] : NAN;
              found[r].score[to] = kept ? narrow.score[from] : INFINITY;
            }
        }
      }
    }
    /* The candidates go back to the rows' owners. */
    KnnwbSplitLists *back = g_new0(KnnwbSplitLists, ranks);
    for (size_t r = 0; r < ranks && local; r++)
      local = knnwb_split_lists_init(&back[r], count, kc, error);
    if (ok && !group->agree(group, local, error))
      ok = FALSE;
    if (ok) {
      for (size_t r = 0; r < ranks; r++) {
        send[r] = found[r].buffer;
        send_bytes[r] = knnwb_split_lists_bytes((size_t)all_counts[r], kc);
        receive[r] = back[r].buffer;
        receive_bytes[r] = knnwb_split_lists_bytes(count, kc);
      }
      ok = group->exchange(group, send, send_bytes, (void *const *)receive, receive_bytes, error);
    }
    if (ok) {
      KnnwbSplitLists merged;
      local = knnwb_split_lists_init(&merged, count, kc, error);
      for (size_t r = 0; r < ranks && local; r++)
        knnwb_split_merge(&merged, &back[r], 0, run->threads);
      if (local) {
        KnnwbSplitRefine refine = {query,       reference,       self, k,       available,
                                   query_first, reference_first, mine, &merged, result,
                                   NULL};
        knnwb_split_refine(run, &refine, count, *left);
        knnwb_split_lists_clear(&merged);
      }
      ok = group->agree(group, local, error);
    }
    for (size_t r = 0; r < ranks; r++) {
      g_free(gathered[r]);
      knnwb_split_lists_clear(&found[r]);
      knnwb_split_lists_clear(&back[r]);
    }
    g_free(gathered);
    g_free(found);
    g_free(back);
  }
  g_array_free(rows, TRUE);
  return ok;
}
