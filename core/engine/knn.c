/*
 * The kNN engine's entry points: knnwb_knn_run validates a request, prepares the rows for the
 * metric, picks the path (split memory over a group's ranks, exact duplicate rows, or the plain
 * search) and hands back the lists; knnwb_knn_self, knnwb_knn_query and the prepared reference
 * (knnwb_knn_reference_*) call it. The search (knn_rounds.c) runs a backend's candidate selection
 * (CPU or CUDA) and refines the candidates into exact, certified neighbour lists. Rows the
 * rounding bound cannot certify are selected again with four times as many candidates, so
 * exactness never depends on the float arithmetic of a backend.
 *
 * The pieces: knn_check.c (the request's checks), knn_backend.c (the backend), knn_rounds.c (the
 * search), knn_distinct.c (duplicate rows), knn_split*.c (split memory), knn_result.c (the lists).
 */
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/knn.h>
#include "knn_internal.h"

void knnwb_knn_options_init(KnnwbKnnOptions *options)
{
  memset(options, 0, sizeof *options);
  options->metric = KNNWB_METRIC_PEARSON;
  options->k = 10;
  options->backend = KNNWB_BACKEND_AUTO;
}

/* The checks of a request that need no data pass: metric, k, shapes. */
static gboolean knnwb_knn_check_request(const KnnwbMatrix *query_data,
                                        const KnnwbMatrix *reference_data, gboolean self,
                                        const KnnwbKnnOptions *options, GError **error)
{
  return knnwb_knn_check_sizes(query_data->n_rows, reference_data->n_rows, query_data->n_cols,
                               reference_data->n_cols, query_data->n_rows, reference_data->n_rows,
                               self, options, error);
}

/*
 * The engine. Alone: check, prepare, select, refine, re-select the uncertified rows. In a group
 * every rank does the same steps on the same matrices, but selects and refines only its share (the
 * self graph's tiles, the query rows' panels) and re-selects its own uncertified rows; the ranks
 * agree after the local checks and after the work, so an error on any rank stops all of them with
 * its message, and the lists of a rank's rows are exchanged only when the caller wants them all.
 * given: a reference prepared once by knnwb_knn_reference_new (checked and prepared already), or
 * NULL to check and prepare reference_data here.
 */
static gboolean knnwb_knn_run(const KnnwbMatrix *query_data, const KnnwbMatrix *reference_data,
                              const KnnwbPrepared *given, const KnnwbKnnOptions *options,
                              KnnwbNeighbors **result_out, GError **error)
{
  const gboolean self = reference_data == NULL;
  if (self)
    reference_data = query_data;
  g_return_val_if_fail(query_data != NULL && options != NULL && result_out != NULL, FALSE);
  *result_out = NULL;
  const KnnwbKnnGroup *group = options->group ? options->group : knnwb_knn_group_get_default();
  if (group != NULL && group->size <= 1)
    group = NULL;
  if (group != NULL && options->group_split)
    return knnwb_knn_split_run(query_data, self ? NULL : reference_data, given, options, group,
                               result_out, error);
  const size_t n = query_data->n_rows, k = options->k;
  size_t first = 0, last = n;
  if (group != NULL)
    knnwb_knn_group_rows(n, group->rank, group->size, &first, &last);
  const gint64 run_start = g_get_monotonic_time();
  /* The previous run's blocks, still being freed, make room for this one first. */
  knnwb_release_wait();

  int threads = knnwb_thread_count(options->n_threads);
  if (group != NULL && options->n_threads <= 0)
    threads = MAX(1, threads / MAX(1, group->local_size)); /* the host's cores are shared */
  KnnwbPrepared query = {0}, reference_storage = {0};
  const KnnwbPrepared *reference = &query;
  KnnwbDuplicates duplicates = {0};
  g_autoptr(KnnwbNeighbors) result = NULL;
  gboolean gathered = FALSE;
  KnnwbSelectFunc select = NULL;
  g_autofree char *backend = NULL;
  gboolean ok = FALSE, nothing_to_do = FALSE, lists_fresh = FALSE;
  KnnwbScreen screen = KNNWB_SCREEN_FP32;
  size_t available = 0;

  /* Local checks and preparation: each rank checks the values of its own rows only (every row is
   * some rank's), the rest is the same on every rank. */
  if (!knnwb_knn_check_request(query_data, reference_data, self, options, error))
    goto checked;
  if (!knnwb_matrix_check_finite_rows(query_data, first, last, error))
    goto checked;
  if (!self && given == NULL) {
    size_t reference_first = 0, reference_last = reference_data->n_rows;
    if (group != NULL)
      knnwb_knn_group_rows(reference_data->n_rows, group->rank, group->size, &reference_first,
                           &reference_last);
    if (!knnwb_matrix_check_finite_rows(reference_data, reference_first, reference_last, error))
      goto checked;
  }
  /* Alone, the lists are written by the search (every slot of every row) or cleared below where
   * not: their pages fault in while a GPU computes instead of here (0.1-0.2 s at 1.5 M rows). */
  lists_fresh = group == NULL;
  result = knnwb_knn_result_alloc(first, last - first, k, !lists_fresh, error);
  if (result == NULL)
    goto checked;
  gint64 prepare_start = g_get_monotonic_time();
  g_debug("knnwb: checks and allocation %.3f s", (double)(prepare_start - run_start) / 1e6);
  /* The reference first: a query shares its euclidean frame (column centring and scale). */
  /* Manhattan: one scale for query and reference, from the larger magnitudes, so neither side's
   * scores can overflow. */
  KnnwbPrepared manhattan_frame = {0};
  const KnnwbPrepared *reference_frame = NULL;
  if (!self && given == NULL && options->metric == KNNWB_METRIC_MANHATTAN) {
    manhattan_frame.scale_exponent = MAX(knnwb_prepare_manhattan_exponent(query_data),
                                         knnwb_prepare_manhattan_exponent(reference_data));
    reference_frame = &manhattan_frame;
  }
  if (given != NULL) {
    reference = given;
  } else if (!self) {
    if (!knnwb_prepared_init(&reference_storage, reference_data, options->metric,
                             options->drop_degenerate, "reference", threads, reference_frame,
                             options->cancel, error))
      goto checked;
    reference = &reference_storage;
  }
  if (!knnwb_prepared_init(&query, query_data, options->metric, options->drop_degenerate,
                           self ? (options->data_name ? options->data_name : "data") : "query",
                           threads, self ? NULL : reference, options->cancel, error))
    goto checked;
  g_debug("knnwb: prepare %.3f s", (double)(g_get_monotonic_time() - prepare_start) / 1e6);
  const size_t valid = reference->n - reference->n_invalid;
  available = self ? (valid > 0 ? valid - 1 : 0) : valid;
  if (n == 0 || (self && query.n_invalid == n)) {
    result->backend_used = g_strdup("none");
    nothing_to_do = TRUE;
    ok = TRUE;
    goto checked;
  }
  if (!knnwb_knn_check_available(k, available, valid, reference->n, self, error))
    goto checked;
  ok = knnwb_knn_choose_backend(options, &select, &backend, error) &&
       knnwb_screen_resolve(options->screen, backend, options->metric, k, &screen, error);
  if (ok)
    knnwb_prepared_set_screen(&query, self ? &query : &reference_storage, screen);
  /* Exact duplicate rows are collapsed before the search and expanded after it: a group of copies
   * larger than the candidate margin could never be certified and would be re-selected with ever
   * more candidates. (Every rank finds the same duplicates.) */
  if (ok && self) {
    const gint64 duplicates_start = g_get_monotonic_time();
    ok = knnwb_duplicates_find(query_data, threads, options->cancel, &duplicates, error);
    g_debug("knnwb: duplicate rows searched in %.3f s",
            (double)(g_get_monotonic_time() - duplicates_start) / 1e6);
  }
  /* Against a reference, copies among its rows tie at one distance from every query row just the
   * same. (A reference prepared once for many queries, given, is searched as it is: hashing it on
   * every call would cost more than a typical small query.) */
  if (ok && !self && given == NULL && k > 0)
    ok = knnwb_duplicates_find(reference_data, threads, options->cancel, &duplicates, error);
checked:
  if (group != NULL && !group->agree(group, ok, error))
    ok = FALSE;
  /* Only the search itself writes every list: the other ways out start from empty lists. */
  const gboolean search_writes_all = ok && !nothing_to_do && duplicates.representative == NULL;
  if (ok && lists_fresh && !search_writes_all)
    knnwb_parallel_for(threads, result->n_queries * k, (size_t)1 << 20, knnwb_knn_result_clear,
                       result);
  if (!ok || nothing_to_do)
    goto out;
  result->backend_used =
      group != NULL ? g_strdup_printf("%s x %d ranks", backend, group->size) : g_strdup(backend);
  result->screen_used = screen;
  if (self && duplicates.n_unique < n) {
    g_debug("knnwb: %zu distinct rows of %zu", duplicates.n_unique, n);
    /* Every rank expands every row (see knnwb_knn_distinct): the lists are whole already. */
    KnnwbNeighbors *all = group != NULL ? knnwb_knn_result_new(0, n, k, error) : result;
    ok = all != NULL;
    if (group != NULL && !group->agree(group, ok, error))
      ok = FALSE;
    ok = ok && knnwb_knn_distinct(options, select, backend, &query, &duplicates, threads, group,
                                  all, error);
    if (group != NULL && !group->agree(group, ok, error))
      ok = FALSE;
    if (ok && group != NULL) {
      all->backend_used = g_strdup(result->backend_used);
      if (options->group_own_rows) {
        /* This rank's slice of the whole lists. */
        memcpy(result->indices, all->indices + first * k, (last - first) * k * sizeof(int64_t));
        memcpy(result->distances, all->distances + first * k, (last - first) * k * sizeof(double));
        memcpy(result->n_found, all->n_found + first, (last - first) * sizeof(int32_t));
        knnwb_neighbors_free(all);
      } else {
        knnwb_neighbors_free(result);
        result = all;
      }
      gathered = TRUE;
    } else if (all != result) {
      knnwb_neighbors_free(all);
    }
    goto out;
  }
  if (!self && duplicates.representative != NULL) {
    g_debug("knnwb: %zu distinct reference rows of %zu", duplicates.n_unique,
            reference_data->n_rows);
    ok = knnwb_knn_distinct_reference(options, select, backend, &query, reference, &duplicates,
                                      threads, group, first, last - first, result, error);
    if (group != NULL && !group->agree(group, ok, error))
      ok = FALSE;
    goto out;
  }
  ok = knnwb_knn_rounds(options, select, backend, &query, reference, self, available, threads,
                        group, first, last - first, lists_fresh, result, error);
  g_debug("knnwb: screen %s, %zu candidates per row, %zu row(s) re-selected in all, %zu of them "
          "compared with every row",
          knnwb_screen_to_string(screen), knnwb_screen_candidates(screen, k), result->n_reselected,
          result->n_exhaustive);
  if (group != NULL && !group->agree(group, ok, error))
    ok = FALSE;
out:
  knnwb_duplicates_clear(&duplicates);
  gint64 clear_start = g_get_monotonic_time();
  knnwb_prepared_release(&query);
  knnwb_prepared_release(&reference_storage);
  knnwb_release_start(); /* these and the rounds' candidate arrays, while the caller goes on */
  g_debug("knnwb: release %.3f s, whole call %.3f s",
          (double)(g_get_monotonic_time() - clear_start) / 1e6,
          (double)(g_get_monotonic_time() - run_start) / 1e6);
  if (ok && group != NULL && !options->group_own_rows && !gathered) {
    gint64 gather_start = g_get_monotonic_time();
    KnnwbNeighbors *all = knnwb_knn_group_gather(group, result, n, error);
    g_debug("knnwb: rank %d: lists gathered in %.3f s", group->rank,
            (double)(g_get_monotonic_time() - gather_start) / 1e6);
    if (all == NULL)
      return FALSE;
    knnwb_neighbors_free(result);
    result = all;
  }
  if (ok)
    *result_out = g_steal_pointer(&result);
  return ok;
}

gboolean knnwb_knn_self(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                        KnnwbNeighbors **result, GError **error)
{
  return knnwb_knn_run(data, NULL, NULL, options, result, error);
}

gboolean knnwb_knn_query(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                         const KnnwbKnnOptions *options, KnnwbNeighbors **result, GError **error)
{
  g_return_val_if_fail(reference != NULL, FALSE);
  return knnwb_knn_run(query, reference, NULL, options, result, error);
}

struct KnnwbKnnReference {
  const KnnwbMatrix *data;
  KnnwbMetric metric;
  gboolean drop_degenerate;
  KnnwbPrepared prepared;
};

KnnwbKnnReference *knnwb_knn_reference_new(const KnnwbMatrix *reference,
                                           const KnnwbKnnOptions *options, GError **error)
{
  g_return_val_if_fail(reference != NULL && options != NULL, NULL);
  if ((unsigned)options->metric >= KNNWB_METRIC_COUNT) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT, "unknown metric %d",
                (int)options->metric);
    return NULL;
  }
  if (!knnwb_matrix_check_finite(reference, error))
    return NULL;
  KnnwbKnnReference *prepared = g_new0(KnnwbKnnReference, 1);
  prepared->data = reference;
  prepared->metric = options->metric;
  prepared->drop_degenerate = options->drop_degenerate;
  if (!knnwb_prepared_init(&prepared->prepared, reference, options->metric,
                           options->drop_degenerate, "reference",
                           knnwb_thread_count(options->n_threads), NULL, options->cancel, error)) {
    g_free(prepared);
    return NULL;
  }
  return prepared;
}

gboolean knnwb_knn_reference_query(const KnnwbKnnReference *reference, const KnnwbMatrix *query,
                                   const KnnwbKnnOptions *options, KnnwbNeighbors **result,
                                   GError **error)
{
  g_return_val_if_fail(reference != NULL && options != NULL, FALSE);
  if (options->metric != reference->metric ||
      options->drop_degenerate != reference->drop_degenerate) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "the reference was prepared for %s%s, the query asks for %s%s",
                knnwb_metric_to_string(reference->metric),
                reference->drop_degenerate ? " (degenerate rows dropped)" : "",
                knnwb_metric_to_string(options->metric),
                options->drop_degenerate ? " (degenerate rows dropped)" : "");
    return FALSE;
  }
  return knnwb_knn_run(query, reference->data, &reference->prepared, options, result, error);
}

void knnwb_knn_reference_free(KnnwbKnnReference *reference)
{
  if (reference == NULL)
    return;
  knnwb_prepared_clear(&reference->prepared);
  g_free(reference);
}
