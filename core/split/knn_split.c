/*
 * Split memory for a group of ranks (options->group_split): each rank holds only its block of
 * rows, the blocks travel, and each rank ends with the exact lists of its own rows.
 *
 * Self graph, R ranks, rank r owning block A_r: step 0 scores A_r against itself (a self job);
 * step s = 1 .. R/2 brings block A_{r+s} to rank r (every rank sends its block to rank r - s, one
 * exchange per prepared array, so no rank packs a second copy of its block) and scores the pair
 * (A_r, A_{r+s}) once for both sides (a two-sided job on the CPU backend; two panel jobs on other
 * backends); the candidates of the visiting rows go back to their owner in the same step. Each
 * unordered pair of blocks is scored once (for even R the pairs of step R/2 meet twice, so each of
 * the two ranks scores half: the lower rank its first half against the other block, the higher
 * rank its block against the other's second half), so the work is about n^2 d / 2 in all and
 * (R/2) m^2 d per rank.
 *
 * Query runs: the query and the reference rows are both cut into blocks; rank r's query block
 * meets every reference block in R steps (its own first).
 *
 * Exactness is core's: a candidate's exact double distance is computed while its row is present
 * (knnwb_prepared_distance, the refinement's own function, with the list's row first, or the
 * GPUs' bit-for-bit copy of it), each row keeps its k best candidates by (distance, index) of all
 * steps and a bound on the pairs the jobs left out (knn_split_best.c: every pair was scored once,
 * and each left out scores at least the bound or is provably farther than the row's k-th), the
 * bound certifies the row as knnwb_refine_row certifies one process's, and rows it cannot certify
 * go through core's certify loop (certify.c, as in one process): they are selected again
 * with four times the candidates (those rows go to every rank, each selects them against its own
 * reference block and sends the candidates back) until all are certified, or, once a round's
 * candidates would be a quarter of a block (dense ties), each rank computes their exact k best in
 * its block and the owner merges those lists by (distance, index). The per-row preparation needs
 * only the row; what depends on all rows (the euclidean column means and scale, the manhattan
 * scale, the largest norm the bound uses, the valid rows) is reduced over the ranks first. So the
 * lists equal one process's, byte for byte.
 *
 * Memory per rank: its block(s) as given and their prepared copy (ranks on one host: the copy
 * packed in the shared window, which the others read in place, and no other), one visiting block
 * (the largest share; on one host the owner's, read in place), the k best of its rows (m x k, 16
 * bytes each), a job's candidate lists (the larger block's, kc wide; two on the CPU's two-sided
 * jobs), the k best of one visiting block, which go back to their owner (in the shared window of
 * ranks on one host, where the owner reads them in place), and the backend's tiles.
 *
 * The pieces, in the order a run uses them: knn_split.c (this file: the checks, then the run from
 * the frame to the gathered lists), knn_split_frame.c (the shared frame), knn_split_plan.c (the
 * first pass's candidates per row, planned from every rank's sample), knn_split_pass.c (the
 * first pass: the schedule above), knn_split_window.c (the blocks of ranks on one host, published
 * once in shared memory), knn_split_select.c (one selection job and its candidates),
 * knn_split_best.c (the k best kept between the steps, and their certificate),
 * knn_split_refine.c (refinement and re-selection of the rows left uncertified),
 * knn_split_exhaustive.c (the rows compared with every row), knn_split_progress.c (progress line,
 * cancel, timing lines) and knn_split_data.c (what travels: prepared blocks, candidate lists, where
 * each block lies).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "base/base.h"
#include "cpu/cpu.h"
#include "group/group.h"
#include "split/split_internal.h"

/* A run's state from the checks to the gathered lists (knnwb_knn_split_run). */
typedef struct {
  const KnnwbMatrix *query_block, *reference_block;
  const KnnwbKnnOptions *options;
  const KnnwbKnnGroup *group;
  gboolean self;
  int threads;
  KnnwbSplitBlocks blocks, reference_blocks;
  size_t first, count, reference_first, reference_count;
  KnnwbPrepared frame, query, reference_storage;
  /* The own rows as the search reads them: query, or (self runs whose window holds the lists that
   * go back) own_packed, a view of the rows packed in the window, query's copy freed. */
  KnnwbPrepared own_packed;
  KnnwbPrepared *own, *reference;
  KnnwbSplitWindow window;
  unsigned char *query_invalid, *reference_invalid; /* flags of every row, for what travels */
  size_t valid, available;
  KnnwbNeighbors *result;
  KnnwbSelectFunc select;
  char *backend;
  KnnwbScreen screen;
  gint64 since;
} KnnwbSplitState;

/* Sizes (every rank's block, in rank order) and the request's checks. Collective. */
static gboolean knnwb_split_run_check(KnnwbSplitState *state, const KnnwbPrepared *given,
                                      GError **error)
{
  const KnnwbKnnGroup *group = state->group;
  const KnnwbMatrix *query_block = state->query_block, *reference_block = state->reference_block;
  int64_t columns[4] = {(int64_t)query_block->n_cols, -(int64_t)query_block->n_cols,
                        (int64_t)reference_block->n_cols, -(int64_t)reference_block->n_cols};
  if (!knnwb_split_blocks_init(group, query_block->n_rows, &state->blocks, error) ||
      !knnwb_split_blocks_init(group, reference_block->n_rows, &state->reference_blocks, error) ||
      !group->reduce(group, columns, 4, KNNWB_GROUP_MAX, error))
    return FALSE;
  knnwb_split_rows_of(&state->blocks, group->rank, &state->first, &state->count);
  knnwb_split_rows_of(&state->reference_blocks, group->rank, &state->reference_first,
                      &state->reference_count);
  gboolean ok = TRUE;
  if (given != NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "a prepared reference cannot be split over ranks");
    ok = FALSE;
  } else if (columns[0] != -columns[1] || columns[2] != -columns[3]) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "the ranks' blocks have different numbers of columns");
    ok = FALSE;
  }
  ok = ok && knnwb_knn_check_sizes(state->blocks.n, state->reference_blocks.n, query_block->n_cols,
                                   reference_block->n_cols, state->count,
                                   state->self ? 0 : state->reference_count, state->self,
                                   state->options, error);
  ok = ok &&
       knnwb_matrix_check_finite_rows(query_block, 0, query_block->n_rows, state->first, error);
  ok = ok &&
       (state->self || knnwb_matrix_check_finite_rows(reference_block, 0, reference_block->n_rows,
                                                      state->reference_first, error));
  return group->agree(group, ok, error);
}

/* The degenerate rows of every rank's block of a matrix (prepared in p from block, whose first row
 * is row block_first), reported once as one process reports them: their count over the ranks and
 * the first of them, with its label from the rank that holds it. Collective. */
static gboolean knnwb_split_report_degenerate(const KnnwbKnnGroup *group, const KnnwbPrepared *p,
                                              const KnnwbMatrix *block, size_t block_first,
                                              const char *role, gboolean drop, GError **error)
{
  int64_t count = (int64_t)p->n_degenerate;
  int64_t first = p->n_degenerate > 0 ? (int64_t)(block_first + p->first_degenerate) : INT64_MAX;
  if (!group->reduce(group, &count, 1, KNNWB_GROUP_SUM, error) ||
      !group->reduce(group, &first, 1, KNNWB_GROUP_MIN, error))
    return FALSE;
  if (count == 0)
    return TRUE;
  const gboolean mine =
      p->n_degenerate > 0 && (int64_t)(block_first + p->first_degenerate) == first;
  const char *label = mine ? knnwb_matrix_row_label(block, p->first_degenerate) : NULL;
  g_autofree int64_t *lengths = g_new(int64_t, group->size);
  if (!knnwb_knn_group_gather_values(group, label ? (int64_t)strlen(label) + 1 : 0, lengths, error))
    return FALSE;
  g_autofree size_t *bytes = g_new(size_t, group->size);
  size_t total = 0;
  for (int r = 0; r < group->size; r++)
    total += bytes[r] = (size_t)lengths[r];
  g_autofree char *labels = g_malloc0(total + 1);
  if (!knnwb_knn_group_gather_bytes(group, label, bytes, labels, error))
    return FALSE;
  return knnwb_prepare_report_degenerate(p->metric, role, drop, (size_t)count, (size_t)first,
                                         total > 0 ? labels : NULL, error);
}

/* The shared frame, then each block prepared in it, then what the bound and the candidate counts
 * need of every row (the valid rows, the largest norms). Collective. */
static gboolean knnwb_split_run_prepare(KnnwbSplitState *state, GError **error)
{
  const KnnwbKnnOptions *options = state->options;
  const KnnwbKnnGroup *group = state->group;
  if (!knnwb_split_frame(group, state->self ? NULL : state->query_block, state->reference_block,
                         state->reference_blocks.n, options->metric, &state->frame, error))
    return FALSE;
  const KnnwbPrepared *like =
      options->metric == KNNWB_METRIC_EUCLIDEAN || options->metric == KNNWB_METRIC_MANHATTAN
          ? &state->frame
          : NULL;
  /* A self run's window made now, its pages faulting in while the rows are prepared (the rows'
   * layout depends on the metric and the frame's scale only). */
  const KnnwbSplitLayout layout = knnwb_split_layout(
      options->metric, like != NULL ? like->scale_exponent : 0, state->query_block->n_cols);
  if (state->self && !knnwb_split_window_begin(group, &layout, options->k, &state->blocks,
                                               state->threads, &state->window, error))
    return FALSE;
  /* Degenerate rows are counted over the ranks before anything is said of them. */
  gboolean ok = TRUE;
  if (!state->self)
    ok = knnwb_prepared_init_block(&state->reference_storage, state->reference_block,
                                   state->reference_first, options->metric, "reference",
                                   state->threads, like, options->cancel, error);
  ok = ok &&
       knnwb_prepared_init_block(&state->query, state->query_block, state->first, options->metric,
                                 state->self ? "data" : "query", state->threads,
                                 state->self ? like : state->reference, options->cancel, error);
  if (!group->agree(group, ok, error))
    return FALSE;
  if ((!state->self && !knnwb_split_report_degenerate(
                           group, &state->reference_storage, state->reference_block,
                           state->reference_first, "reference", options->drop_degenerate, error)) ||
      !knnwb_split_report_degenerate(
          group, &state->query, state->query_block, state->first,
          state->self ? (options->data_name ? options->data_name : "data") : "query",
          options->drop_degenerate, error))
    return FALSE;
  KnnwbPrepared *reference = state->reference;
  int64_t valid = (int64_t)(reference->n - reference->n_invalid);
  int64_t norms[2] = {knnwb_split_double_bits(state->query.max_norm),
                      knnwb_split_double_bits(reference->max_norm)};
  if (!group->reduce(group, &valid, 1, KNNWB_GROUP_SUM, error) ||
      !group->reduce(group, norms, 2, KNNWB_GROUP_MAX, error))
    return FALSE;
  state->query.max_norm = knnwb_split_bits_double(norms[0]);
  reference->max_norm = knnwb_split_bits_double(norms[1]);
  state->valid = (size_t)valid;
  state->available = state->self ? (valid > 0 ? (size_t)valid - 1 : 0) : (size_t)valid;
  /* (The prepared sets have no flags when no row is invalid.) */
  state->reference_invalid = g_malloc0(MAX(reference->n, (size_t)1));
  if (reference->invalid != NULL)
    memcpy(state->reference_invalid, reference->invalid, reference->n);
  state->query_invalid = g_malloc0(MAX(state->query.n, (size_t)1));
  if (state->query.invalid != NULL)
    memcpy(state->query_invalid, state->query.invalid, state->query.n);
  return TRUE;
}

/* The lists, and the backend and screen, or nothing to do (*nothing). Collective. */
static gboolean knnwb_split_run_setup(KnnwbSplitState *state, gboolean *nothing, GError **error)
{
  const KnnwbKnnOptions *options = state->options;
  const size_t k = options->k;
  *nothing = FALSE;
  state->result = knnwb_knn_result_new(state->first, state->count, k, error);
  gboolean ok = state->result != NULL;
  if (ok && (state->blocks.n == 0 || (state->self && state->valid == 0))) {
    state->result->backend_used = g_strdup("none");
    *nothing = TRUE;
  } else if (ok && !knnwb_knn_check_available(k, state->available, state->valid,
                                              state->reference_blocks.n, state->self, error)) {
    ok = FALSE;
  } else if (ok) {
    ok = knnwb_knn_choose_backend(options, &state->select, &state->backend, error) &&
         knnwb_screen_resolve(options->screen, state->backend, options->metric, k, &state->screen,
                              error);
  }
  if (!knnwb_knn_group_agree_backend(state->group, ok, ok && state->select != NULL,
                                     state->select != NULL && state->select != knnwb_cpu_select,
                                     error))
    return FALSE;
  if (*nothing)
    return TRUE;
  knnwb_prepared_set_screen(&state->query, state->reference, state->screen);
  state->result->backend_used =
      g_strdup_printf("%s x %d ranks (split)", state->backend, state->group->size);
  state->result->screen_used = state->screen;
  return TRUE;
}

/* The first pass over the blocks into the own rows' k best, then those certified; the rows left
 * uncertified (local numbers) appended to left. Collective. */
static gboolean knnwb_split_run_first(KnnwbSplitState *state, const KnnwbSplitRun *run,
                                      GArray *left, GError **error)
{
  KnnwbSplitBest best = {0};
  gboolean ok =
      knnwb_split_best_init_in(&best, state->count, state->options->k, NULL, run->threads, error);
  if (!state->group->agree(state->group, ok, error))
    return FALSE;
  knnwb_split_mark(state->group, "lists allocated", &state->since);
  if (state->self)
    ok = knnwb_split_self_pass(run, state->own, state->reference_invalid, &state->blocks,
                               &state->window, &best, error);
  else
    ok = knnwb_split_query_pass(run, state->own, state->first, state->reference,
                                state->reference_invalid, &state->reference_blocks, &best, error);
  if (ok) {
    state->since = g_get_monotonic_time();
    knnwb_split_best_certify(run, &best, state->own, state->reference, state->available,
                             state->result, left);
    knnwb_split_mark(state->group, "certificate", &state->since);
  }
  knnwb_split_best_clear(&best);
  return ok;
}

/* The own rows of a run as its planner and its certify rounds see them. */
static KnnwbSplitRows knnwb_split_rows(KnnwbSplitState *state, KnnwbSplitRun *run)
{
  return (KnnwbSplitRows){run,
                          state->own,
                          state->reference,
                          state->query_invalid,
                          state->first,
                          state->reference_first,
                          state->self,
                          state->options->k,
                          state->available,
                          state->result};
}

/* The certify loop's hooks for a split run: every one collective. */
static gboolean knnwb_split_certify_pending(void *data, size_t mine, size_t *all, GError **error)
{
  const KnnwbSplitRows *rows = data;
  int64_t pending = (int64_t)mine;
  if (!rows->run->group->reduce(rows->run->group, &pending, 1, KNNWB_GROUP_SUM, error))
    return FALSE;
  *all = (size_t)pending;
  return TRUE;
}

static gboolean knnwb_split_certify_reselect(void *data, const int64_t *mine, size_t count,
                                             size_t kc, GArray *left, GError **error)
{
  const KnnwbSplitRows *rows = data;
  rows->run->kc = kc;
  g_debug("knnwb: rank %d: %zu row(s) re-selected with %zu candidates", rows->run->group->rank,
          count, kc);
  return knnwb_split_retry(rows, mine, count, left, error);
}

static gboolean knnwb_split_certify_exhaustive(void *data, const int64_t *mine, size_t count,
                                               GError **error)
{
  return knnwb_split_exhaustive(data, mine, count, error);
}

/* Rows the bound cannot certify, until every rank is done: core's certify loop with every rank's
 * rows selected again against every block, or compared with every row. Collective. */
static gboolean knnwb_split_run_certify(KnnwbSplitState *state, KnnwbSplitRun *run, GArray **left,
                                        GError **error)
{
  const KnnwbKnnGroup *group = state->group;
  /* The ranks finish their passes at different times: the first to finish waits here in the
   * group's sleeping poll, not in the reduction's busy one (which would take a core from the
   * others when ranks share cores). */
  if (!group->agree(group, TRUE, error))
    return FALSE;
  KnnwbSplitRows rows = knnwb_split_rows(state, run);
  /* A rank's job chooses from its block only. Cancel is polled inside the rounds, where the
   * ranks agree on it. */
  const size_t total = state->self ? state->available + 1 : state->available;
  const size_t ranks = (size_t)group->size;
  const KnnwbCertify certify = {knnwb_split_certify_reselect,
                                knnwb_split_certify_exhaustive,
                                knnwb_split_certify_pending,
                                &rows,
                                total,
                                (total + ranks - 1) / ranks,
                                NULL,
                                state->own->d,
                                state->select == knnwb_cpu_select};
  KnnwbCertifyCounts counts = {0};
  if (!knnwb_certify_run(&certify, run->kc, left, &counts, error))
    return FALSE;
  int64_t totals[2] = {(int64_t)counts.reselected, (int64_t)counts.exhaustive};
  if (!group->reduce(group, totals, 2, KNNWB_GROUP_SUM, error))
    return FALSE;
  state->result->n_reselected = (size_t)totals[0];
  state->result->n_exhaustive = (size_t)totals[1];
  knnwb_split_mark(group, "re-selection", &state->since);
  return TRUE;
}

/* The first pass's candidates per row, planned from a sample of every rank's rows where the screen
 * asks for it (knn_split_plan.c). The kc-wide lists a rank's first pass holds at once stay within
 * a quarter of its share of what the machine can still give: in a self pass a job's room (the
 * largest block's rows), two on a two-sided backend (the other block's rows of the job), in a
 * query pass the step's found lists of its rows. (The lists kept between the steps are k wide.)
 * Collective; errors: the group's transport. */
static gboolean knnwb_split_run_plan(KnnwbSplitState *state, KnnwbSplitRun *run, GError **error)
{
  const size_t cell = knnwb_split_lists_bytes(1, 1);
  const size_t listed =
      MAX(state->self ? (run->two_sided ? 2 : 1) * state->blocks.largest : state->count, (size_t)1);
  const size_t memory = knnwb_memory_available();
  const size_t max_kc = memory == SIZE_MAX
                            ? 4 * run->kc
                            : memory / (size_t)MAX(state->group->local_size, 1) / 4 / cell / listed;
  const KnnwbSplitRows rows = knnwb_split_rows(state, run);
  return knnwb_split_plan(&rows, state->blocks.n, max_kc, &run->kc, NULL, error);
}

/* A self run's blocks published in the group's shared window (knn_split_window.c). Where the
 * lists that go back lie there too, the window stays open to the end of the certify rounds and the
 * own rows are read from their packed copy in it: the prepared copy (a block of floats, its
 * statistics and flags) is freed, so a rank holds its rows once beside the input block (the
 * packed rows are the same values, so the lists do not change). From then on nothing reads the
 * input block's values (the checks, the frame and the preparation are done; the passes, the
 * certificate and the certify rounds read state->own; the prepared copy's rows, which alias the
 * block's values for most metrics, are gone), so the caller may free them too (input_done): the
 * rank then holds its rows once in all. Collective. */
static gboolean knnwb_split_run_window(KnnwbSplitState *state, const KnnwbSplitRun *run,
                                       GError **error)
{
  if (!knnwb_split_window_fill(run, &state->query, state->query_invalid, &state->blocks,
                               &state->window, error))
    return FALSE;
  /* KNNWB_SPLIT_OWN_PACKED=0 (tests, benchmarks): the prepared copy stays. */
  if (!state->window.back_shared || g_strcmp0(g_getenv("KNNWB_SPLIT_OWN_PACKED"), "0") == 0)
    return TRUE;
  const KnnwbSplitLayout layout =
      knnwb_split_layout(state->query.metric, state->query.scale_exponent, state->query.d);
  knnwb_split_view(&layout, &state->query,
                   (char *)state->window.parts[state->group->rank] + KNNWB_SPLIT_HEADER,
                   state->count, &state->own_packed);
  knnwb_prepared_release_rows(&state->query);
  knnwb_release_start(); /* on a helper thread, now */
  state->own = state->reference = &state->own_packed;
  if (state->options->input_done != NULL)
    state->options->input_done(state->options->input_done_data);
  return TRUE;
}

/* The search itself, from the first pass to certified lists of the own rows. Collective. */
static gboolean knnwb_split_run_search(KnnwbSplitState *state, GError **error)
{
  const KnnwbKnnOptions *options = state->options;
  /* KNNWB_SPLIT_PANELS=1 (tests) gives the CPU the two-panel path of the other backends. */
  KnnwbSplitRun run = {options,
                       state->group,
                       state->select,
                       state->backend,
                       state->threads,
                       MIN(state->available, knnwb_screen_candidates(state->screen, options->k)),
                       state->select == knnwb_cpu_select && g_getenv("KNNWB_SPLIT_PANELS") == NULL,
                       NULL,
                       g_getenv("KNNWB_SPLIT_TEST_EXACT") ? atoi(g_getenv("KNNWB_SPLIT_TEST_EXACT"))
                                                          : 0};
  KnnwbSplitProgress progress = {0};
  if (state->group->rank == 0 && options->progress != NULL)
    run.progress = &progress;
  GArray *left = g_array_new(FALSE, FALSE, sizeof(int64_t));
  gboolean ok = knnwb_split_run_plan(state, &run, error);
  if (ok)
    knnwb_split_mark(state->group, "candidates planned", &state->since);
  ok = ok && (!state->self || knnwb_split_run_window(state, &run, error));
  if (ok && state->self)
    knnwb_split_mark(state->group, "rows packed in the shared window", &state->since);
  ok = ok && knnwb_split_run_first(state, &run, left, error) &&
       knnwb_split_run_certify(state, &run, &left, error);
  if (left != NULL)
    g_array_free(left, TRUE);
  /* Every rank alike: the window is open on all or on none. */
  if (!knnwb_split_window_close(state->group, &state->window, ok ? error : NULL))
    ok = FALSE;
  return ok;
}

gboolean knnwb_knn_split_run(const KnnwbMatrix *query_block, const KnnwbMatrix *reference_block,
                             const KnnwbPrepared *given, const KnnwbKnnOptions *options,
                             const KnnwbKnnGroup *group, KnnwbNeighbors **result_out,
                             GError **error)
{
  KnnwbSplitState state = {.query_block = query_block,
                           .reference_block = reference_block ? reference_block : query_block,
                           .options = options,
                           .group = group,
                           .self = reference_block == NULL,
                           .since = g_get_monotonic_time()};
  state.own = &state.query;
  state.reference = state.self ? &state.query : &state.reference_storage;
  state.threads = knnwb_thread_count(options->n_threads);
  if (options->n_threads <= 0) /* the host's cores are shared */
    state.threads = MAX(1, state.threads / MAX(1, group->local_size));
  *result_out = NULL;
  gboolean nothing = FALSE;
  gboolean ok = knnwb_split_run_check(&state, given, error);
  if (ok)
    knnwb_split_mark(group, "checks", &state.since);
  ok = ok && knnwb_split_run_prepare(&state, error) &&
       knnwb_split_run_setup(&state, &nothing, error);
  if (ok)
    knnwb_split_mark(group, "frame and prepare", &state.since);
  ok = ok && (nothing || knnwb_split_run_search(&state, error));
  if (ok && !options->group_own_rows) {
    KnnwbNeighbors *all = knnwb_knn_group_gather_blocks(
        group, state.result, state.blocks.n, state.blocks.first, state.blocks.count, error);
    ok = all != NULL;
    if (ok) {
      knnwb_neighbors_free(state.result);
      state.result = all;
    }
  }
  /* (a run that stopped before its search: the window begun with the preparation) */
  if (!knnwb_split_window_close(group, &state.window, ok ? error : NULL))
    ok = FALSE;
  knnwb_split_blocks_clear(&state.blocks);
  knnwb_split_blocks_clear(&state.reference_blocks);
  knnwb_prepared_clear(&state.query);
  knnwb_prepared_clear(&state.reference_storage);
  g_free(state.frame.column_mean);
  g_free(state.query_invalid);
  g_free(state.reference_invalid);
  g_free(state.backend);
  if (ok)
    *result_out = g_steal_pointer(&state.result);
  else
    g_clear_pointer(&state.result, knnwb_neighbors_free);
  return ok;
}
