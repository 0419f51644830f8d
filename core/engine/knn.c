/*
 * The kNN engine's entry points: knnwb_knn_run validates a request, prepares the rows for the
 * metric, picks the path (split memory over a group's ranks, exact duplicate rows, or the plain
 * search) and hands back the lists (large clustered self graphs go cluster by cluster first,
 * core/partition/); knnwb_knn_self, knnwb_knn_query and the prepared reference
 * (knnwb_knn_reference_*) call it. The search (knn_rounds.c) runs a backend's candidate selection
 * (CPU or CUDA) and refines the candidates into exact, certified neighbour lists. Rows the
 * rounding bound cannot certify are selected again with four times as many candidates, so
 * exactness never depends on the float arithmetic of a backend.
 *
 * The pieces: knn_check.c (the request's checks), knn_backend.c (the backend), knn_rounds.c (the
 * search), certify.c (the certify loop every search shares), knn_distinct.c (duplicate rows),
 * core/split/ (split memory), knn_result.c (the lists).
 */
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/knn.h>
#include <knnwb/parallel.h>
#include "base/base.h"
#include "cpu/cpu.h"
#include "engine/engine_internal.h"
#include "group/group.h"
#include "partition/partition.h"
#include "tree/tree.h"
#include "split/split.h"

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

/* One call of the engine without split memory (knnwb_knn_run): the request, then the state its
 * steps build. given: a reference prepared once by knnwb_knn_reference_new (checked and prepared
 * already), or NULL to check and prepare reference_data here. first/last: this rank's rows (all
 * rows alone). */
typedef struct {
  const KnnwbMatrix *query_data, *reference_data;
  const KnnwbPrepared *given;
  const KnnwbKnnOptions *options;
  const KnnwbKnnGroup *group;
  gboolean self;
  size_t n, k, first, last;
  int threads;
  gint64 start;
  KnnwbPrepared query, reference_storage;
  const KnnwbPrepared *reference;
  KnnwbDuplicates duplicates;
  KnnwbNeighbors *result;
  gboolean lists_fresh, nothing_to_do, gathered;
  gboolean rows_started; /* knnwb_knn_rows_start began an upload of the rows */
  KnnwbSelectFunc select;
  char *backend;
  KnnwbScreen screen;
  size_t available;
  const double *within; /* knnwb_knn_query_within's, or NULL */
  guint64 *hashes;      /* a self search's row hashes, from the prepare pass to the duplicates */
} KnnwbKnnRun;

/* Local checks and the lists: each rank checks the values of its own rows only (every row is
 * some rank's), the rest is the same on every rank. */
static gboolean knnwb_knn_run_check(KnnwbKnnRun *run, GError **error)
{
  const KnnwbKnnGroup *group = run->group;
  /* (One process's self search checks its rows in the prepare pass: knnwb_prepared_init_also.) */
  if (!knnwb_knn_check_request(run->query_data, run->reference_data, run->self, run->options,
                               error) ||
      ((!run->self || group != NULL) &&
       !knnwb_matrix_check_finite_rows(run->query_data, run->first, run->last, 0, error)))
    return FALSE;
  if (!run->self && run->given == NULL) {
    size_t reference_first = 0, reference_last = run->reference_data->n_rows;
    if (group != NULL)
      knnwb_knn_group_rows(run->reference_data->n_rows, group->rank, group->size, &reference_first,
                           &reference_last);
    if (!knnwb_matrix_check_finite_rows(run->reference_data, reference_first, reference_last, 0,
                                        error))
      return FALSE;
  }
  /* Alone, the lists are written by the search (every slot of every row) or cleared where not:
   * their pages fault in while a GPU computes instead of here (0.1-0.2 s at 1.5 M rows). */
  run->lists_fresh = group == NULL;
  run->result =
      knnwb_knn_result_alloc(run->first, run->last - run->first, run->k, !run->lists_fresh, error);
  return run->result != NULL;
}

/* The rows prepared for the metric: the reference first (a query shares its euclidean frame:
 * column centring and scale; manhattan: one scale for query and reference, from the larger
 * magnitudes, so neither side's scores can overflow). */
static gboolean knnwb_knn_run_prepare_rows(KnnwbKnnRun *run, GError **error)
{
  const KnnwbKnnOptions *options = run->options;
  KnnwbPrepared manhattan_frame = {0};
  const KnnwbPrepared *reference_frame = NULL;
  if (!run->self && run->given == NULL && options->metric == KNNWB_METRIC_MANHATTAN) {
    manhattan_frame.scale_exponent = MAX(knnwb_prepare_manhattan_exponent(run->query_data),
                                         knnwb_prepare_manhattan_exponent(run->reference_data));
    reference_frame = &manhattan_frame;
  }
  run->reference = &run->query;
  if (run->given != NULL) {
    run->reference = run->given;
  } else if (!run->self) {
    if (!knnwb_prepared_init(&run->reference_storage, run->reference_data, options->metric,
                             options->drop_degenerate, "reference", run->threads, reference_frame,
                             options->cancel, error))
      return FALSE;
    run->reference = &run->reference_storage;
  }
  if (run->self) { /* hashed for the duplicate search (alone: checked) in the same pass */
    run->hashes = run->query_data->n_rows > 1
                      ? knnwb_try_new_array(run->query_data->n_rows, sizeof(guint64),
                                            "the row hashes", run->query_data->n_rows, error)
                      : NULL;
    if (run->query_data->n_rows > 1 && run->hashes == NULL)
      return FALSE;
    const KnnwbPrepareAlso also = {.skip_bad = run->group != NULL, .hash = run->hashes};
    return knnwb_prepared_init_also(&run->query, run->query_data, options->metric,
                                    options->drop_degenerate,
                                    options->data_name ? options->data_name : "data", run->threads,
                                    options->cancel, &also, error);
  }
  return knnwb_prepared_init(&run->query, run->query_data, options->metric,
                             options->drop_degenerate, "query", run->threads, run->reference,
                             options->cancel, error);
}

/* Exact duplicate rows are collapsed before the search and expanded after it: a group of copies
 * larger than the candidate margin could never be certified and would be re-selected with ever
 * more candidates. (Every rank finds the same duplicates.) */
static gboolean knnwb_knn_run_duplicates(KnnwbKnnRun *run, GError **error)
{
  const KnnwbKnnOptions *options = run->options;
  if (run->self) {
    const gint64 duplicates_start = g_get_monotonic_time();
    gboolean ok =
        knnwb_duplicates_find_hashed(run->query_data, options->metric, run->hashes, run->threads,
                                     options->cancel, &run->duplicates, error);
    g_clear_pointer(&run->hashes, g_free);
    g_debug("knnwb: duplicate rows searched in %.3f s",
            (double)(g_get_monotonic_time() - duplicates_start) / 1e6);
    return ok;
  }
  /* Against a reference, copies among its rows tie at one distance from every query row just the
   * same. (A reference prepared once for many queries, given, is searched as it is: hashing it on
   * every call would cost more than a typical small query.) */
  if (run->given == NULL && run->k > 0)
    return knnwb_duplicates_find(run->reference_data, options->metric, run->threads,
                                 options->cancel, &run->duplicates, error);
  return TRUE;
}

/* The GPUs' automatic FP16 screen kept only where its window fits the rows (knnwb_margin_too_wide):
 * else FP32 from the start, as `--screen fp32` runs. One process's self or query run (ranks and
 * a partitioned run's sub-searches keep the screen their group or run chose). A raised cancel
 * keeps FP16 (the search's next step stops). */
static void knnwb_knn_run_screen_fits(KnnwbKnnRun *run)
{
  const KnnwbKnnOptions *options = run->options;
  if (options->screen != KNNWB_SCREEN_AUTO || run->screen != KNNWB_SCREEN_FP16 ||
      run->select == knnwb_cpu_select || run->group != NULL || run->within != NULL ||
      knnwb_knn_margin_memo_active())
    return;
  const KnnwbPrepared *reference = run->self ? &run->query : run->reference;
  const size_t kc = MIN(run->available, knnwb_screen_candidates(run->screen, run->k));
  const gint64 start = g_get_monotonic_time();
  if (knnwb_margin_too_wide(&run->query, reference, run->self, run->query.n, run->k, kc,
                            run->available, run->threads, options->cancel)) {
    run->screen = KNNWB_SCREEN_FP32;
    knnwb_prepared_set_screen(&run->query, run->self ? &run->query : &run->reference_storage,
                              run->screen);
    g_debug("knnwb: screen: fp16's window holds more than %d x %zu rows for most sample rows: "
            "fp32 (%.3f s)",
            KNNWB_MARGIN_WIDE, kc, (double)(g_get_monotonic_time() - start) / 1e6);
  }
}

/* The rows prepared, what each row can choose from, the exact duplicate rows, the backend and
 * screen; or nothing to do. */
static gboolean knnwb_knn_run_prepare(KnnwbKnnRun *run, GError **error)
{
  const KnnwbKnnOptions *options = run->options;
  const gint64 prepare_start = g_get_monotonic_time();
  g_debug("knnwb: checks and allocation %.3f s", (double)(prepare_start - run->start) / 1e6);
  if (!knnwb_knn_run_prepare_rows(run, error))
    return FALSE;
  g_debug("knnwb: prepare %.3f s", (double)(g_get_monotonic_time() - prepare_start) / 1e6);
  const size_t valid = run->reference->n - run->reference->n_invalid;
  run->available = run->self ? (valid > 0 ? valid - 1 : 0) : valid;
  if (run->n == 0 || (run->self && run->query.n_invalid == run->n)) {
    run->result->backend_used = g_strdup("none");
    run->nothing_to_do = TRUE;
    return TRUE;
  }
  if (!knnwb_knn_check_available(run->k, run->available, valid, run->reference->n, run->self,
                                 error))
    return FALSE;
  /* A GPU's rows upload while core searches the duplicates and samples them (margin planner,
   * centroids): a self search of the rows as they are (copies collapsed: dropped below), not a
   * partitioned run's sub-search; begun here with the screen the backend would resolve. */
  const gboolean uploads =
      run->self && run->group == NULL && run->within == NULL && !knnwb_knn_margin_memo_active();
  KnnwbScreen expected = KNNWB_SCREEN_FP32;
  if (uploads && knnwb_knn_expects_gpu(options) &&
      knnwb_screen_resolve(options->screen, "cuda", options->metric, run->k, &expected, NULL) &&
      expected == KNNWB_SCREEN_FP16) {
    knnwb_prepared_set_screen(&run->query, &run->query, expected);
    run->rows_started = knnwb_knn_rows_start(options, &run->query, TRUE);
  }
  /* The duplicates first: choosing the backend waits for the GPUs' start, which this overlaps. */
  if (!knnwb_knn_run_duplicates(run, error) ||
      !knnwb_knn_choose_backend(options, &run->select, &run->backend, error) ||
      !knnwb_screen_resolve(options->screen, run->backend, options->metric, run->k, &run->screen,
                            error))
    return FALSE;
  knnwb_prepared_set_screen(&run->query, run->self ? &run->query : &run->reference_storage,
                            run->screen);
  knnwb_knn_run_screen_fits(run);
  const gboolean wanted = uploads && run->duplicates.n_unique == run->n &&
                          run->select != knnwb_cpu_select && run->screen == KNNWB_SCREEN_FP16;
  if (run->rows_started && !wanted) {
    knnwb_knn_rows_drop();
    run->rows_started = FALSE;
  } else if (!run->rows_started && wanted) {
    run->rows_started = knnwb_knn_rows_start(options, &run->query, FALSE);
  }
  return TRUE;
}

/* The self lists of data with exact duplicate rows. Every rank expands every row (see
 * knnwb_knn_distinct): the lists are whole already, and a rank that wants its own rows takes its
 * slice. */
static gboolean knnwb_knn_run_distinct_self(KnnwbKnnRun *run, GError **error)
{
  const KnnwbKnnGroup *group = run->group;
  const size_t k = run->k, first = run->first, rows = run->last - run->first;
  g_debug("knnwb: %zu distinct rows of %zu", run->duplicates.n_unique, run->n);
  KnnwbNeighbors *all = group != NULL ? knnwb_knn_result_new(0, run->n, k, error) : run->result;
  gboolean ok = all != NULL;
  if (group != NULL && !group->agree(group, ok, error))
    ok = FALSE;
  ok = ok && knnwb_knn_distinct(run->options, run->select, run->backend, &run->query,
                                &run->duplicates, run->threads, group, all, error);
  if (group != NULL && !group->agree(group, ok, error))
    ok = FALSE;
  if (ok && group != NULL) {
    all->backend_used = g_strdup(run->result->backend_used);
    if (run->options->group_own_rows) {
      memcpy(run->result->indices, all->indices + first * k, rows * k * sizeof(int64_t));
      memcpy(run->result->distances, all->distances + first * k, rows * k * sizeof(double));
      memcpy(run->result->n_found, all->n_found + first, rows * sizeof(int32_t));
      knnwb_neighbors_free(all);
    } else {
      knnwb_neighbors_free(run->result);
      run->result = all;
    }
    run->gathered = TRUE;
  } else if (all != run->result) {
    knnwb_neighbors_free(all);
  }
  return ok;
}

/* The search of the prepared rows: duplicates collapsed, or the plain rounds. With a group the
 * ranks agree on its outcome. */
static gboolean knnwb_knn_run_search(KnnwbKnnRun *run, GError **error)
{
  const KnnwbKnnGroup *group = run->group;
  run->result->backend_used = group != NULL
                                  ? g_strdup_printf("%s x %d ranks", run->backend, group->size)
                                  : g_strdup(run->backend);
  run->result->screen_used = run->screen;
  if (run->self && run->duplicates.n_unique < run->n)
    return knnwb_knn_run_distinct_self(run, error);
  gboolean ok;
  if (!run->self && run->duplicates.representative != NULL) {
    g_debug("knnwb: %zu distinct reference rows of %zu", run->duplicates.n_unique,
            run->reference_data->n_rows);
    ok = knnwb_knn_distinct_reference(
        run->options, run->select, run->backend, &run->query, run->reference, &run->duplicates,
        run->threads, group, run->first, run->last - run->first, run->within, run->result, error);
  } else {
    ok =
        knnwb_knn_rounds(run->options, run->select, run->backend, &run->query, run->reference,
                         run->self, run->available, run->threads, group, run->first,
                         run->last - run->first, run->lists_fresh, run->within, run->result, error);
    g_debug("knnwb: screen %s, %zu candidates per row, %zu row(s) re-selected in all, %zu of "
            "them compared with every row",
            knnwb_screen_to_string(run->screen), knnwb_screen_candidates(run->screen, run->k),
            run->result->n_reselected, run->result->n_exhaustive);
  }
  if (ok && run->within != NULL)
    knnwb_knn_trim_within(run->result, run->within, run->first, run->last - run->first,
                          run->threads);
  if (group != NULL && !group->agree(group, ok, error))
    ok = FALSE;
  return ok;
}

/* The run's memory handed back (freed while the caller goes on), and the lists of every row
 * gathered when a group's caller wants them all. */
static gboolean knnwb_knn_run_finish(KnnwbKnnRun *run, gboolean ok, GError **error)
{
  const KnnwbKnnGroup *group = run->group;
  knnwb_duplicates_clear(&run->duplicates);
  g_clear_pointer(&run->hashes, g_free);
  if (run->rows_started) /* before the rows they were uploaded from are freed */
    knnwb_knn_rows_drop();
  gint64 clear_start = g_get_monotonic_time();
  knnwb_prepared_release(&run->query);
  knnwb_prepared_release(&run->reference_storage);
  knnwb_release_start(); /* these and the rounds' candidate arrays, while the caller goes on */
  g_debug("knnwb: release %.3f s, whole call %.3f s",
          (double)(g_get_monotonic_time() - clear_start) / 1e6,
          (double)(g_get_monotonic_time() - run->start) / 1e6);
  g_clear_pointer(&run->backend, g_free);
  if (ok && group != NULL && !run->options->group_own_rows && !run->gathered) {
    gint64 gather_start = g_get_monotonic_time();
    KnnwbNeighbors *all = knnwb_knn_group_gather(group, run->result, run->n, error);
    g_debug("knnwb: rank %d: lists gathered in %.3f s", group->rank,
            (double)(g_get_monotonic_time() - gather_start) / 1e6);
    ok = all != NULL;
    if (ok) {
      knnwb_neighbors_free(run->result);
      run->result = all;
    }
  }
  return ok;
}

/*
 * The engine without split memory. Alone: check, prepare, select, refine, re-select the
 * uncertified rows. In a group every rank does the same steps on the same matrices, but selects
 * and refines only its share (the self graph's tiles, the query rows' panels) and re-selects its
 * own uncertified rows; the ranks agree after the local checks and after the work, so an error on
 * any rank stops all of them with its message, and the lists of a rank's rows are exchanged only
 * when the caller wants them all.
 */
static gboolean knnwb_knn_run_whole(KnnwbKnnRun *run, KnnwbNeighbors **result_out, GError **error)
{
  const KnnwbKnnGroup *group = run->group;
  run->first = 0;
  run->last = run->n;
  if (group != NULL)
    knnwb_knn_group_rows(run->n, group->rank, group->size, &run->first, &run->last);
  run->start = g_get_monotonic_time();
  /* The previous run's blocks, still being freed, make room for this one first. */
  knnwb_release_wait();
  /* The GPUs start while the rows are checked and prepared (kernels/device_start.cu). */
  knnwb_knn_devices_start(run->options);
  run->threads = knnwb_thread_count(run->options->n_threads);
  if (group != NULL && run->options->n_threads <= 0) /* the host's cores are shared */
    run->threads = MAX(1, run->threads / MAX(1, group->local_size));
  gboolean ok = knnwb_knn_run_check(run, error) && knnwb_knn_run_prepare(run, error);
  if (group != NULL &&
      !knnwb_knn_group_agree_backend(group, ok, ok && run->select != NULL,
                                     run->select != NULL && run->select != knnwb_cpu_select, error))
    ok = FALSE;
  /* Only the search itself writes every list: the other ways out start from empty lists. */
  const gboolean search_writes_all =
      ok && !run->nothing_to_do && run->duplicates.representative == NULL;
  if (ok && run->lists_fresh && !search_writes_all)
    knnwb_parallel_for(run->threads, run->result->n_queries * run->k, (size_t)1 << 20,
                       knnwb_knn_result_clear, run->result);
  if (ok && !run->nothing_to_do)
    ok = knnwb_knn_run_search(run, error);
  ok = knnwb_knn_run_finish(run, ok, error);
  knnwb_knn_devices_wait(); /* a run that ended before choosing its backend */
  if (ok)
    *result_out = g_steal_pointer(&run->result);
  g_clear_pointer(&run->result, knnwb_neighbors_free);
  return ok;
}

/* The engine's one way in: split memory over a group's ranks, or the whole rows in every process
 * (see knnwb_knn_run_whole). */
static gboolean knnwb_knn_run(const KnnwbMatrix *query_data, const KnnwbMatrix *reference_data,
                              const KnnwbPrepared *given, const KnnwbKnnOptions *options,
                              const double *within, KnnwbNeighbors **result_out, GError **error)
{
  g_return_val_if_fail(query_data != NULL && options != NULL && result_out != NULL, FALSE);
  *result_out = NULL;
  const KnnwbKnnGroup *group = options->group;
  if (group != NULL && group->size <= 1)
    group = NULL;
  if (group != NULL && options->group_split)
    return knnwb_knn_split_run(query_data, reference_data, given, options, group, result_out,
                               error);
  KnnwbKnnRun run = {.query_data = query_data,
                     .reference_data = reference_data ? reference_data : query_data,
                     .given = given,
                     .options = options,
                     .group = group,
                     .self = reference_data == NULL,
                     .n = query_data->n_rows,
                     .k = options->k,
                     .within = within};
  return knnwb_knn_run_whole(&run, result_out, error);
}

/* ok, and then the lists checked (knnwb_knn_result_check) on every rank, the ranks agreeing on
 * the outcome; lists that fail are freed. (A failure reaches this point on every rank alike, the
 * ranks having agreed on it already with its own words, so only success is agreed on here.) A
 * split run's indices reach past its block: they are bounded by every rank's rows (one sum over
 * the ranks). */
static gboolean knnwb_knn_checked(gboolean ok, const KnnwbKnnOptions *options, gboolean self,
                                  size_t n_reference, KnnwbNeighbors **result, GError **error)
{
  if (!ok)
    return FALSE;
  const KnnwbKnnGroup *group = options->group;
  const gboolean grouped = group != NULL && group->size > 1;
  /* (ranks of one host share its cores, as in the search) */
  int threads = knnwb_thread_count(options->n_threads);
  if (grouped && options->n_threads <= 0)
    threads = MAX(1, threads / MAX(1, group->local_size));
  const gint64 start = g_get_monotonic_time();
  int64_t bound = (int64_t)n_reference;
  if (grouped && options->group_split && !group->reduce(group, &bound, 1, KNNWB_GROUP_SUM, error)) {
    g_clear_pointer(result, knnwb_neighbors_free);
    return FALSE;
  }
  ok = knnwb_knn_result_check(*result, self, (size_t)bound, threads, error);
  g_debug("knnwb: lists checked in %.3f s", (double)(g_get_monotonic_time() - start) / 1e6);
  if (grouped)
    ok = group->agree(group, ok, error);
  if (!ok)
    g_clear_pointer(result, knnwb_neighbors_free);
  return ok;
}

gboolean knnwb_knn_self_unchecked(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                                  KnnwbNeighbors **result, GError **error)
{
  g_return_val_if_fail(data != NULL && options != NULL && result != NULL, FALSE);
  /* Rows of a few columns: a k-d tree on the CPU (core/tree/), no tile GEMM to choose. */
  *result = NULL;
  if (knnwb_tree_applies(data, options)) {
    gboolean ok = knnwb_tree_self(data, options, result, error);
    if (!ok || *result != NULL) {
      knnwb_knn_devices_wait(); /* (GPUs a caller began starting, unused) */
      return ok;
    }
  }
  /* The GPUs choose their tile GEMM while the rows are checked, prepared and partitioned. */
  knnwb_knn_gemm_start(options, data->n_rows, data->n_rows, data->n_cols);
  /* Split ranks on GPUs: every row on every rank, where they have room (knn_together.c). */
  const KnnwbKnnGroup *group = options->group;
  gboolean no_room = FALSE;
  /* (rows of a few columns are put together for the tree whether or not the run may otherwise) */
  gboolean ok = group == NULL || group->size <= 1 || !options->group_split ||
                (!options->group_split_gather && !knnwb_tree_may_apply(options)) ||
                knnwb_knn_self_together(data, options, result, &no_room, error);
  /* Large clustered data: cluster by cluster when bounds skip most pairs (core/partition/). */
  if (ok && *result == NULL && !no_room)
    ok = knnwb_partition_self(data, options, result, error);
  if (ok && *result == NULL)
    ok = knnwb_knn_run(data, NULL, NULL, options, NULL, result, error);
  knnwb_knn_devices_wait(); /* a run that ended before its search */
  return ok;
}

gboolean knnwb_knn_self(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                        KnnwbNeighbors **result, GError **error)
{
  g_return_val_if_fail(data != NULL && options != NULL && result != NULL, FALSE);
  const gboolean ok = knnwb_knn_self_unchecked(data, options, result, error);
  return knnwb_knn_checked(ok, options, TRUE, data->n_rows, result, error);
}

gboolean knnwb_knn_query(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                         const KnnwbKnnOptions *options, KnnwbNeighbors **result, GError **error)
{
  g_return_val_if_fail(query != NULL && reference != NULL && options != NULL, FALSE);
  /* Rows of a few columns: a k-d tree of the reference on the CPU (core/tree/). */
  *result = NULL;
  if (knnwb_tree_applies_query(query, reference, options)) {
    gboolean ok = knnwb_tree_query(query, reference, options, result, error);
    if (!ok || *result != NULL) {
      knnwb_knn_devices_wait(); /* (GPUs a caller began starting, unused) */
      return knnwb_knn_checked(ok, options, FALSE, reference->n_rows, result, error);
    }
  }
  knnwb_knn_gemm_start(options, query->n_rows, reference->n_rows, query->n_cols);
  const gboolean ok = knnwb_knn_run(query, reference, NULL, options, NULL, result, error);
  knnwb_knn_devices_wait();
  return knnwb_knn_checked(ok, options, FALSE, reference->n_rows, result, error);
}

gboolean knnwb_knn_query_within_unchecked(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                                          const KnnwbKnnOptions *options, const double *within,
                                          KnnwbNeighbors **result, GError **error)
{
  g_return_val_if_fail(query != NULL && reference != NULL && options != NULL, FALSE);
  g_return_val_if_fail(options->group == NULL || options->group->size <= 1, FALSE);
  knnwb_knn_gemm_start(options, query->n_rows, reference->n_rows, query->n_cols);
  const gboolean ok = knnwb_knn_run(query, reference, NULL, options, within, result, error);
  knnwb_knn_devices_wait();
  return ok;
}

gboolean knnwb_knn_query_within(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                                const KnnwbKnnOptions *options, const double *within,
                                KnnwbNeighbors **result, GError **error)
{
  const gboolean ok =
      knnwb_knn_query_within_unchecked(query, reference, options, within, result, error);
  return knnwb_knn_checked(ok, options, FALSE, reference->n_rows, result, error);
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
  const gboolean ok =
      knnwb_knn_run(query, reference->data, &reference->prepared, options, NULL, result, error);
  return knnwb_knn_checked(ok, options, FALSE, reference->data->n_rows, result, error);
}

void knnwb_knn_reference_free(KnnwbKnnReference *reference)
{
  if (reference == NULL)
    return;
  knnwb_prepared_clear(&reference->prepared);
  g_free(reference);
}
