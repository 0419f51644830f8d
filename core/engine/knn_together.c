/*
 * Split ranks that put their rows together. In split memory (options->group_split) each rank holds
 * only its block of rows, and the split search compares every pair of blocks. Three searches need
 * every row on every rank instead: the k-d tree of rows of a few columns (core/tree/: always, the
 * rows being small), the partitioned search (core/partition/partition_gather.c asks whether it
 * pays, on a sample) and, on GPUs, the whole-input search itself: the CUDA backend
 * scores a visiting pair of blocks as two panels, while the whole rows' tiles are shared between
 * the ranks and scored once (as `knnwb knn` reads the whole input on GPUs). Where the run may
 * (options->group_split_gather; the tree's rows whatever it says) and every rank has room, the
 * ranks put their blocks together,
 * search the whole rows, and each keeps its block's lists (cut again from the whole-input run's
 * even shares when the blocks are uneven).
 */
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "engine/engine_internal.h"
#include "group/group.h"
#include "tree/tree.h"

/* Whether this rank could hold the whole run's n rows (or, rows_held, only what a whole-input run
 * adds to them), with the lists and arrays of a whole-input run, in half of its share of the
 * memory available, and whether the whole run passes the request's checks; never with absent
 * rows or ranks as read (only the values travel). */
/* Whether a search of the whole run's n rows passes the request's checks, with no absent rows or
 * ranks as read in this rank's block. */
static gboolean knnwb_knn_together_checks(const KnnwbMatrix *block, const KnnwbKnnOptions *options,
                                          size_t n)
{
  KnnwbKnnOptions whole = *options;
  whole.group_split = FALSE;
  return block->n_absent_rows == 0 && block->row_ranks == NULL &&
         knnwb_knn_check_sizes(n, n, block->n_cols, block->n_cols, n, n, TRUE, &whole, NULL);
}

static gboolean knnwb_knn_together_fits(const KnnwbMatrix *block, const KnnwbKnnOptions *options,
                                        size_t n, gboolean rows_held)
{
  if (!knnwb_knn_together_checks(block, options, n))
    return FALSE;
  /* the whole rows (unless every rank holds them: an input read whole), the whole-input run's
   * lists (an index and a distance for each of n x k) and its n-long arrays (cells, reaches,
   * members, k-th distances) */
  const double need = (double)n * ((rows_held ? 0.0 : (double)block->n_cols * sizeof(float)) +
                                   (double)options->k * (sizeof(int64_t) + sizeof(double)) + 32.0);
  /* KNNWB_PARTITION_GATHER_ROOM=BYTES: the memory the host is taken to have (tests) */
  const char *forced = g_getenv("KNNWB_PARTITION_GATHER_ROOM");
  const double host = forced != NULL && *forced != '\0' ? (double)g_ascii_strtoull(forced, NULL, 10)
                                                        : (double)knnwb_memory_available();
  const double available = host / (double)MAX(options->group->local_size, 1);
  /* at most half: the run's tiles, the block the rank read and the writer need the rest */
  return need <= 0.5 * available;
}

/* The whole matrix block is this rank's block of, when it holds every row of the run (an input
 * every rank read whole): the block's rows at its place among the blocks, no absent rows or ranks
 * as read. NULL otherwise. */
static const KnnwbMatrix *knnwb_knn_together_held(const KnnwbMatrix *block,
                                                  const KnnwbKnnGroup *group,
                                                  const KnnwbTogether *t)
{
  size_t first, at = 0;
  const KnnwbMatrix *whole = knnwb_matrix_whole_of(block, &first);
  for (int r = 0; r < group->rank; r++)
    at += (size_t)t->counts[r];
  return whole != NULL && whole->n_rows == t->n && whole->n_cols == block->n_cols && first == at &&
                 whole->n_absent_rows == 0 && knnwb_matrix_row_ranks(whole) == NULL
             ? whole
             : NULL;
}

gboolean knnwb_knn_together_counts(const KnnwbMatrix *block, const KnnwbKnnGroup *group,
                                   KnnwbTogether *t, GError **error)
{
  knnwb_knn_together_clear(t);
  t->counts = g_new(int64_t, (size_t)group->size);
  if (!knnwb_knn_group_gather_values(group, (int64_t)block->n_rows, t->counts, error))
    return FALSE;
  for (int r = 0; r < group->size; r++)
    t->n += (size_t)t->counts[r];
  return TRUE;
}

gboolean knnwb_knn_together_agree(const KnnwbMatrix *block, const KnnwbKnnOptions *options,
                                  gboolean want, KnnwbTogether *t, GError **error)
{
  /* Every rank says whether it holds every row, and whether it has room with and without them
   * (blocks of different widths: the split search's checks say so; nothing travels first). */
  int64_t v[6] = {knnwb_knn_together_held(block, options->group, t) != NULL,
                  want && knnwb_knn_together_fits(block, options, t->n, TRUE),
                  want && knnwb_knn_together_fits(block, options, t->n, FALSE),
                  (int64_t)block->n_cols,
                  -(int64_t)block->n_cols,
                  want && knnwb_knn_together_checks(block, options, t->n)};
  t->held = t->go = t->apply = FALSE;
  if (!options->group->reduce(options->group, v, 6, KNNWB_GROUP_MIN, error))
    return FALSE;
  t->held = v[0] != 0;
  t->apply = v[5] && v[3] == -v[4];
  t->go = (t->held ? v[1] : v[2]) && t->apply;
  return TRUE;
}

gboolean knnwb_knn_together_rows(const KnnwbMatrix *block, const KnnwbKnnGroup *group,
                                 const KnnwbTogether *t, KnnwbMatrix **whole, GError **error)
{
  if (t->held) { /* every rank read the input whole: nothing travels */
    const KnnwbMatrix *held = knnwb_knn_together_held(block, group, t);
    g_assert(held != NULL); /* (every rank said so in knnwb_knn_together_agree) */
    *whole = knnwb_matrix_new_wrapped(held->n_rows, held->n_cols, held->values, NULL, NULL);
    g_debug("knnwb: every rank holds every row already (the input read whole)");
    return TRUE;
  }
  GError *local = NULL;
  *whole = knnwb_knn_group_gather_rows(group, block, t->counts, &local);
  if (*whole == NULL && g_error_matches(local, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY)) {
    g_clear_error(&local);
    return TRUE;
  }
  if (local != NULL)
    g_propagate_error(error, local);
  return *whole != NULL;
}

void knnwb_knn_together_clear(KnnwbTogether *t)
{
  g_free(t->counts);
  memset(t, 0, sizeof *t);
}

gboolean knnwb_knn_together_lists(const KnnwbKnnOptions *options, const KnnwbTogether *t,
                                  KnnwbNeighbors **result, GError **error)
{
  /* (the run's outcome is the same on every rank, so all cut again or none) */
  if (*result == NULL || !options->group_own_rows)
    return TRUE;
  return knnwb_knn_group_recut(options->group, t->counts, t->n, result, error);
}

/* Whether split ranks put their rows together whatever they are: on GPUs, or when
 * KNNWB_PARTITION_GATHER_ALWAYS=1 (tests: that path on the CPU). */
static gboolean knnwb_knn_together_always(const KnnwbKnnOptions *options)
{
  return g_strcmp0(g_getenv("KNNWB_PARTITION_GATHER_ALWAYS"), "1") == 0 ||
         knnwb_knn_uses_gpu(options);
}

/* The whole rows' labels where the k-d tree searches them under an angular metric: its refusal of,
 * or warning about, a degenerate row names the row's label as one process's does
 * (knnwb_prepare_report_degenerate). Copied from the input every rank holds, or every rank's
 * block's gathered. Collective unless t->held. */
static gboolean knnwb_knn_together_labels(const KnnwbMatrix *block, const KnnwbKnnOptions *options,
                                          const KnnwbTogether *t, KnnwbMatrix *whole,
                                          GError **error)
{
  if (options->metric == KNNWB_METRIC_EUCLIDEAN || options->metric == KNNWB_METRIC_MANHATTAN)
    return TRUE;
  if (!t->held)
    return knnwb_knn_group_gather_labels(options->group, block, whole, error);
  const KnnwbMatrix *held = knnwb_knn_together_held(block, options->group, t);
  for (size_t i = 0; i < whole->n_rows && held->row_labels != NULL; i++)
    if (held->row_labels[i] != NULL)
      knnwb_matrix_set_row_label(whole, i, held->row_labels[i]);
  return TRUE;
}

gboolean knnwb_knn_self_together(const KnnwbMatrix *block, const KnnwbKnnOptions *options,
                                 KnnwbNeighbors **result, gboolean *no_room, GError **error)
{
  *result = NULL;
  *no_room = FALSE;
  const KnnwbKnnGroup *group = options->group;
  const gint64 start = g_get_monotonic_time();
  g_auto(KnnwbTogether) t = {0};
  if (!knnwb_knn_together_counts(block, group, &t, error))
    return FALSE;
  /* Rows of a few columns go to the tree (core/tree/), whose search needs every row: they are
   * small beside the lists (at most 32 bytes a row), and the split search would compare every
   * pair of them. */
  const gboolean tree = knnwb_tree_applies_shape(t.n, block->n_cols, options);
  if (!knnwb_knn_together_agree(
          block, options,
          (options->group_split_gather && knnwb_knn_together_always(options)) || tree, &t, error))
    return FALSE;
  if (!t.go)
    return TRUE;
  KnnwbMatrix *whole = NULL;
  if (!knnwb_knn_together_rows(block, group, &t, &whole, error))
    return FALSE;
  if (whole == NULL) {
    g_debug("knnwb: a rank cannot hold every row after all: the split search");
    *no_room = TRUE;
    return TRUE;
  }
  g_debug("knnwb: the ranks' rows put together for the whole-input search (%zu rows) in %.3f s",
          t.n, (double)(g_get_monotonic_time() - start) / 1e6);
  KnnwbKnnOptions together = *options;
  together.group_split = FALSE;
  together.group_split_gather = FALSE;
  /* unchecked: the caller (knnwb_knn_self) checks the lists once, as they are cut again */
  gboolean ok = (!tree || knnwb_knn_together_labels(block, options, &t, whole, error)) &&
                knnwb_knn_self_unchecked(whole, &together, result, error);
  knnwb_matrix_free(whole);
  return ok && knnwb_knn_together_lists(options, &t, result, error);
}
