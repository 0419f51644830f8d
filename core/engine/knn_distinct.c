/* Exact duplicate rows in a kNN run: the search runs on the distinct rows only (a group of copies
 * larger than the candidate margin could never be certified) and the lists are expanded to every
 * copy after it (duplicates.c finds and expands; this file runs the search between). */
#include "engine/engine_internal.h"
#include "group/group.h"

/* The distinct rows of from (duplicates' representatives), agreed by every rank of group. */
static gboolean knnwb_knn_gather_distinct(KnnwbPrepared *distinct, const KnnwbPrepared *from,
                                          const KnnwbDuplicates *duplicates,
                                          const KnnwbKnnGroup *group, GError **error)
{
  gboolean ok = knnwb_prepared_gather(distinct, from, duplicates->representative,
                                      duplicates->n_unique, error);
  if (group != NULL && !group->agree(group, ok, error)) {
    if (ok)
      knnwb_prepared_clear(distinct);
    return FALSE;
  }
  return ok;
}

/* The self lists of data with exact duplicate rows: the distinct rows' lists, expanded into result
 * (all n rows). With a group the distinct rows' lists are shared out and gathered on every rank
 * first (each row's expansion needs its representative's list, which may be another rank's). */
gboolean knnwb_knn_distinct(const KnnwbKnnOptions *options, KnnwbSelectFunc select,
                            const char *backend, const KnnwbPrepared *query,
                            const KnnwbDuplicates *duplicates, int threads,
                            const KnnwbKnnGroup *group, KnnwbNeighbors *result, GError **error)
{
  KnnwbPrepared distinct;
  if (!knnwb_knn_gather_distinct(&distinct, query, duplicates, group, error))
    return FALSE;
  gboolean ok = TRUE;
  knnwb_prepared_set_screen(&distinct, &distinct, query->screen);
  const size_t valid = distinct.n - distinct.n_invalid;
  KnnwbKnnOptions distinct_options = *options;
  distinct_options.k = MIN(options->k, valid > 0 ? valid - 1 : 0);
  g_autoptr(KnnwbNeighbors) lists = NULL;
  if (distinct_options.k > 0) {
    size_t first = 0, last = distinct.n;
    if (group != NULL)
      knnwb_knn_group_rows(distinct.n, group->rank, group->size, &first, &last);
    lists = knnwb_knn_result_new(first, last - first, distinct_options.k, error);
    ok = lists != NULL;
    if (group != NULL && !group->agree(group, ok, error))
      ok = FALSE;
    ok = ok &&
         knnwb_knn_rounds(&distinct_options, select, backend, &distinct, &distinct, TRUE, valid - 1,
                          threads, group, first, last - first, FALSE, NULL, lists, error);
    if (ok) {
      result->n_reselected += lists->n_reselected;
      result->n_exhaustive += lists->n_exhaustive;
    }
    if (group != NULL) {
      if (!group->agree(group, ok, error))
        ok = FALSE;
      KnnwbNeighbors *all = ok ? knnwb_knn_group_gather(group, lists, distinct.n, error) : NULL;
      ok = all != NULL;
      knnwb_neighbors_free(g_steal_pointer(&lists));
      lists = all;
    }
  }
  if (ok)
    knnwb_duplicates_expand(duplicates, query, lists, threads, result);
  knnwb_prepared_clear(&distinct);
  return ok;
}

/* The lists of rows row0 .. row0 + n_rows - 1 of query against a reference with exact duplicate
 * rows: the lists against its distinct rows, expanded into result (within as knnwb_knn_rounds':
 * a copy lies as far as its row). In a group every rank does its own query rows, as without
 * duplicates; the ranks agree after each step that can fail alone. */
gboolean knnwb_knn_distinct_reference(const KnnwbKnnOptions *options, KnnwbSelectFunc select,
                                      const char *backend, KnnwbPrepared *query,
                                      const KnnwbPrepared *reference,
                                      const KnnwbDuplicates *duplicates, int threads,
                                      const KnnwbKnnGroup *group, size_t row0, size_t n_rows,
                                      const double *within, KnnwbNeighbors *result, GError **error)
{
  KnnwbPrepared distinct;
  if (!knnwb_knn_gather_distinct(&distinct, reference, duplicates, group, error))
    return FALSE;
  gboolean ok = TRUE;
  /* The gathered rows share the reference's bound on norms: the screen stays the same. */
  knnwb_prepared_set_screen(query, &distinct, query->screen);
  const size_t valid = distinct.n - distinct.n_invalid;
  KnnwbKnnOptions distinct_options = *options;
  distinct_options.k = MIN(options->k, valid);
  g_autoptr(KnnwbNeighbors) lists = knnwb_knn_result_new(row0, n_rows, distinct_options.k, error);
  ok = lists != NULL;
  if (group != NULL && !group->agree(group, ok, error))
    ok = FALSE;
  ok = ok && knnwb_knn_rounds(&distinct_options, select, backend, query, &distinct, FALSE, valid,
                              threads, group, row0, n_rows, FALSE, within, lists, error);
  if (ok) {
    result->n_reselected += lists->n_reselected;
    result->n_exhaustive += lists->n_exhaustive;
    knnwb_duplicates_expand_query(duplicates, lists, threads, result);
  }
  knnwb_prepared_clear(&distinct);
  return ok;
}
