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
 * (knnwb_prepared_distance, the refinement's own function, with the list's row first), each row
 * keeps the kc best candidates by (score, index) of all steps (every pair was scored once, so these
 * are the kc best of the whole job), knnwb_refine_row sorts and certifies them, and rows it cannot
 * certify are selected again with four times the candidates: those rows (a few) go to every rank,
 * each selects them against its own reference block and sends the candidates back, until all are
 * certified. The per-row preparation needs only the row; what depends on all rows (the euclidean
 * column means and scale, the manhattan scale, the largest norm the bound uses, the valid rows) is
 * reduced over the ranks first. So the lists equal one process's, byte for byte.
 *
 * Memory per rank: its block(s) and their prepared copy, one visiting block (the largest share),
 * the candidate lists of its rows (m x kc) and of one visiting block, and the backend's tiles.
 *
 * The pieces, in the order a run uses them: knn_split.c (this file: the checks, then the run from
 * the frame to the gathered lists), knn_split_frame.c (the shared frame), knn_split_pass.c (the
 * first pass: the schedule above), knn_split_select.c (one selection job and its candidates),
 * knn_split_refine.c (refinement and re-selection of the rows left uncertified),
 * knn_split_progress.c (progress line, cancel, timing lines) and knn_split_data.c (what travels:
 * prepared blocks, candidate lists, where each block lies).
 */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include "knn_split_internal.h"

/* Row-wise finite check of a block, naming the row by its number in the whole matrix. */
static gboolean knnwb_split_check_finite(const KnnwbMatrix *block, size_t first_row, GError **error)
{
  const size_t d = block->n_cols;
  for (size_t i = 0; i < block->n_rows; i++)
    for (size_t j = 0; j < d; j++) {
      const float value = block->values[i * d + j];
      if (isfinite(value))
        continue;
      const char *label = knnwb_matrix_row_label(block, i);
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_DATA,
                  "row %zu%s%s%s, column %zu (both counted from 0) holds %s: remove or impute "
                  "missing values first",
                  first_row + i, label ? " (" : "", label ? label : "", label ? ")" : "", j,
                  isnan(value) ? "NaN" : "an infinite value");
      return FALSE;
    }
  return TRUE;
}

gboolean knnwb_knn_split_run(const KnnwbMatrix *query_block, const KnnwbMatrix *reference_block,
                             const KnnwbPrepared *given, const KnnwbKnnOptions *options,
                             const KnnwbKnnGroup *group, KnnwbNeighbors **result_out,
                             GError **error)
{
  const gboolean self = reference_block == NULL;
  if (self)
    reference_block = query_block;
  *result_out = NULL;
  const size_t k = options->k;
  int threads = knnwb_thread_count(options->n_threads);
  if (options->n_threads <= 0)
    threads = MAX(1, threads / MAX(1, group->local_size)); /* the host's cores are shared */
  KnnwbPrepared frame = {0}, query = {0}, reference_storage = {0};
  KnnwbPrepared *reference = self ? &query : &reference_storage;
  g_autoptr(KnnwbNeighbors) result = NULL;
  g_autofree unsigned char *reference_invalid = NULL, *query_invalid = NULL;
  g_autofree char *backend = NULL;
  KnnwbSelectFunc select = NULL;
  KnnwbSplitLists lists = {0};
  KnnwbSplitBlocks blocks = {0}, reference_blocks = {0};
  GArray *left = NULL;
  KnnwbScreen screen = KNNWB_SCREEN_FP32;
  gboolean ok = TRUE, nothing_to_do = FALSE;
  gint64 since = g_get_monotonic_time();

  /* Sizes: every rank's block, in rank order. */
  int64_t columns[4] = {(int64_t)query_block->n_cols, -(int64_t)query_block->n_cols,
                        (int64_t)reference_block->n_cols, -(int64_t)reference_block->n_cols};
  if (!knnwb_split_blocks_init(group, query_block->n_rows, &blocks, error) ||
      !knnwb_split_blocks_init(group, reference_block->n_rows, &reference_blocks, error) ||
      !group->reduce(group, columns, 4, KNNWB_GROUP_MAX, error)) {
    ok = FALSE;
    goto out;
  }
  const size_t n = blocks.n, n_reference = reference_blocks.n;
  size_t first, count, reference_first, reference_count;
  knnwb_split_rows_of(&blocks, group->rank, &first, &count);
  knnwb_split_rows_of(&reference_blocks, group->rank, &reference_first, &reference_count);
  if (given != NULL) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "a prepared reference cannot be split over ranks");
    ok = FALSE;
  } else if (columns[0] != -columns[1] || columns[2] != -columns[3]) {
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_INVALID_ARGUMENT,
                "the ranks' blocks have different numbers of columns");
    ok = FALSE;
  }
  ok = ok && knnwb_knn_check_sizes(n, n_reference, query_block->n_cols, reference_block->n_cols,
                                   count, self ? 0 : reference_count, self, options, error);
  ok = ok && knnwb_split_check_finite(query_block, first, error);
  ok = ok && (self || knnwb_split_check_finite(reference_block, reference_first, error));
  if (!group->agree(group, ok, error)) {
    ok = FALSE;
    goto out;
  }

  knnwb_split_mark(group, "checks", &since);
  /* The shared frame, then each block prepared in it. */
  if (!knnwb_split_frame(group, self ? NULL : query_block, reference_block, n_reference,
                         options->metric, &frame, error))
    goto out;
  const KnnwbPrepared *like =
      options->metric == KNNWB_METRIC_EUCLIDEAN || options->metric == KNNWB_METRIC_MANHATTAN
          ? &frame
          : NULL;
  ok = TRUE;
  if (!self)
    ok = knnwb_prepared_init_rows(&reference_storage, reference_block, reference_first,
                                  options->metric, options->drop_degenerate, "reference", threads,
                                  like, options->cancel, error);
  ok = ok && knnwb_prepared_init_rows(
                 &query, query_block, first, options->metric, options->drop_degenerate,
                 self ? (options->data_name ? options->data_name : "data") : "query", threads,
                 self ? like : reference, options->cancel, error);
  if (!group->agree(group, ok, error)) {
    ok = FALSE;
    goto out;
  }
  /* What the bound and the candidate counts need of every row. */
  int64_t valid = (int64_t)(reference->n - reference->n_invalid);
  int64_t norms[2] = {knnwb_split_double_bits(query.max_norm),
                      knnwb_split_double_bits(reference->max_norm)};
  if (!group->reduce(group, &valid, 1, KNNWB_GROUP_SUM, error) ||
      !group->reduce(group, norms, 2, KNNWB_GROUP_MAX, error)) {
    ok = FALSE;
    goto out;
  }
  query.max_norm = knnwb_split_bits_double(norms[0]);
  reference->max_norm = knnwb_split_bits_double(norms[1]);
  const size_t available = self ? (valid > 0 ? (size_t)valid - 1 : 0) : (size_t)valid;
  /* Flags of every row, for what travels (the prepared sets have none when no row is invalid). */
  reference_invalid = g_malloc0(MAX(reference->n, (size_t)1));
  if (reference->invalid != NULL)
    memcpy(reference_invalid, reference->invalid, reference->n);
  query_invalid = g_malloc0(MAX(query.n, (size_t)1));
  if (query.invalid != NULL)
    memcpy(query_invalid, query.invalid, query.n);
  result = knnwb_knn_result_new(first, count, k, error);
  ok = result != NULL;
  if (ok && (n == 0 || (self && valid == 0))) {
    result->backend_used = g_strdup("none");
    nothing_to_do = TRUE;
  } else if (ok &&
             !knnwb_knn_check_available(k, available, (size_t)valid, n_reference, self, error)) {
    ok = FALSE;
  } else if (ok) {
    ok = knnwb_knn_choose_backend(options, &select, &backend, error) &&
         knnwb_screen_resolve(options->screen, backend, options->metric, k, &screen, error);
  }
  if (!group->agree(group, ok, error)) {
    ok = FALSE;
    goto out;
  }
  if (nothing_to_do)
    goto gather;
  knnwb_prepared_set_screen(&query, reference, screen);
  result->backend_used = g_strdup_printf("%s x %d ranks (split)", backend, group->size);
  result->screen_used = screen;
  /* KNNWB_SPLIT_PANELS=1 (tests) gives the CPU the two-panel path of the other backends. */
  KnnwbSplitRun run = {options,
                       group,
                       select,
                       backend,
                       threads,
                       MIN(available, knnwb_screen_candidates(screen, k)),
                       select == knnwb_cpu_select && g_getenv("KNNWB_SPLIT_PANELS") == NULL,
                       NULL};
  KnnwbSplitProgress progress = {0};
  if (group->rank == 0 && options->progress != NULL)
    run.progress = &progress;

  ok = knnwb_split_lists_init(&lists, count, run.kc, error);
  if (!group->agree(group, ok, error)) {
    ok = FALSE;
    goto out;
  }
  knnwb_split_mark(group, "frame, prepare and allocation", &since);
  if (self)
    ok = knnwb_split_self_pass(&run, &query, reference_invalid, &blocks, &lists, error);
  else
    ok = knnwb_split_query_pass(&run, &query, first, reference, reference_invalid,
                                &reference_blocks, &lists, error);
  if (!ok)
    goto out;
  since = g_get_monotonic_time();
  left = g_array_new(FALSE, FALSE, sizeof(int64_t));
  KnnwbSplitRefine refine = {&query,          reference, self,   k,      available, first,
                             reference_first, NULL,      &lists, result, NULL};
  knnwb_split_refine(&run, &refine, count, left);
  knnwb_split_lists_clear(&lists);
  knnwb_split_mark(group, "refine", &since);
  /* Rows the bound cannot certify: four times the candidates, until every rank is done. */
  const size_t total = self ? available + 1 : available;
  /* The ranks finish their passes at different times: the first to finish waits here in the
   * group's sleeping poll, not in the reduction's busy one (which would take a core from the
   * others when ranks share cores). */
  if (!group->agree(group, TRUE, error)) {
    ok = FALSE;
    goto out;
  }
  for (;;) {
    int64_t pending = (int64_t)left->len;
    if (!group->reduce(group, &pending, 1, KNNWB_GROUP_SUM, error)) {
      ok = FALSE;
      goto out;
    }
    if (pending == 0)
      break;
    if (run.kc == total) {
      g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_FAILED, "internal error: certification failed");
      ok = FALSE;
      goto out;
    }
    run.kc = MIN(total, run.kc * 4);
    result->n_reselected += left->len;
    g_debug("knnwb: rank %d: %u row(s) re-selected with %zu candidates", group->rank, left->len,
            run.kc);
    ok = knnwb_split_retry(&run, &query, query_invalid, first, reference, reference_first, self, k,
                           available, result, &left, error);
    if (!ok)
      goto out;
  }
  {
    int64_t reselected = (int64_t)result->n_reselected;
    ok = group->reduce(group, &reselected, 1, KNNWB_GROUP_SUM, error);
    result->n_reselected = (size_t)reselected;
  }
  knnwb_split_mark(group, "re-selection", &since);
gather:
  if (ok && !options->group_own_rows) {
    KnnwbNeighbors *all =
        knnwb_knn_group_gather_blocks(group, result, blocks.n, blocks.first, blocks.count, error);
    ok = all != NULL;
    if (ok) {
      knnwb_neighbors_free(result);
      result = all;
    }
  }
out:
  knnwb_split_lists_clear(&lists);
  knnwb_split_blocks_clear(&blocks);
  knnwb_split_blocks_clear(&reference_blocks);
  if (left != NULL)
    g_array_free(left, TRUE);
  knnwb_prepared_clear(&query);
  knnwb_prepared_clear(&reference_storage);
  g_free(frame.column_mean);
  if (ok)
    *result_out = g_steal_pointer(&result);
  return ok;
}
