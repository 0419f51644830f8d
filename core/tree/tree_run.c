/* The runs of core/tree/ (tree.h): when the tree takes a self or a query run, the request's
 * checks, the tree of the reference's rows (tree_build.c), this process's share of the rows
 * searched (tree_search.c), the ranks agreeing on the outcome, and every row's lists gathered
 * where a group's caller wants them. */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "engine/engine.h"
#include "group/group.h"
#include "tree/tree.h"
#include "tree/tree_internal.h"

gboolean knnwb_tree_applies(const KnnwbMatrix *data, const KnnwbKnnOptions *options)
{
  /* (split ranks hold a block each: knnwb_knn_self_together puts their rows together first) */
  const gboolean split = options->group != NULL && options->group->size > 1 && options->group_split;
  return !split && knnwb_tree_applies_shape(data->n_rows, data->n_cols, options);
}

gboolean knnwb_tree_may_apply(const KnnwbKnnOptions *options)
{
  const char *setting = g_getenv("KNNWB_TREE");
  if (setting != NULL && strcmp(setting, "0") == 0)
    return FALSE;
  /* A partitioned search asked for by name (KNNWB_PARTITION=on, the partition's tests and
   * benchmarks) is left to run, unless the tree is asked for too. */
  const char *partition = g_getenv("KNNWB_PARTITION");
  if ((setting == NULL || strcmp(setting, "1") != 0) && partition != NULL &&
      (strcmp(partition, "on") == 0 || strcmp(partition, "1") == 0))
    return FALSE;
  return options->metric == KNNWB_METRIC_EUCLIDEAN || options->metric == KNNWB_METRIC_MANHATTAN;
}

/* Whether rows of d columns are few enough for the tree, on the backend options choose. */
static gboolean knnwb_tree_columns(size_t d, const KnnwbKnnOptions *options)
{
  return d > 0 &&
         d <= (knnwb_knn_uses_gpu(options) ? KNNWB_TREE_MAX_COLUMNS_GPU : KNNWB_TREE_MAX_COLUMNS);
}

/* Whether the environment asks for the tree at any size (KNNWB_TREE=1, the tests). */
static gboolean knnwb_tree_any_size(void)
{
  return g_strcmp0(g_getenv("KNNWB_TREE"), "1") == 0;
}

gboolean knnwb_tree_applies_shape(size_t n, size_t d, const KnnwbKnnOptions *options)
{
  if (!knnwb_tree_may_apply(options) || options->k < 1 || options->k >= n ||
      n > (size_t)INT64_MAX || (!knnwb_tree_any_size() && n < KNNWB_TREE_MIN_ROWS))
    return FALSE;
  return knnwb_tree_columns(d, options);
}

gboolean knnwb_tree_applies_query(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                                  const KnnwbKnnOptions *options)
{
  /* (split ranks hold a block of each: their search compares the blocks) */
  const gboolean split = options->group != NULL && options->group->size > 1 && options->group_split;
  const size_t n = reference->n_rows, queries = query->n_rows;
  if (split || !knnwb_tree_may_apply(options) || query->n_cols != reference->n_cols ||
      options->k < 1 || options->k > n || n > (size_t)INT64_MAX || queries == 0 ||
      (!knnwb_tree_any_size() && (n < KNNWB_TREE_MIN_ROWS || queries < KNNWB_TREE_MIN_QUERIES)))
    return FALSE;
  return knnwb_tree_columns(reference->n_cols, options);
}

typedef struct {
  const float *values;
  gint finite; /* (atomic) cleared at the first value that is not */
} KnnwbTreeFinite;

static void knnwb_tree_finite_values(size_t first, size_t last, void *data)
{
  KnnwbTreeFinite *f = data;
  gboolean finite = TRUE;
  for (size_t i = first; i < last; i++)
    finite = finite && isfinite(f->values[i]);
  if (!finite)
    g_atomic_int_set(&f->finite, 0);
}

/* Whether every value of m is finite, on threads threads. O(rows x columns). */
static gboolean knnwb_tree_finite(const KnnwbMatrix *m, int threads)
{
  KnnwbTreeFinite f = {.values = m->values, .finite = 1};
  knnwb_parallel_for(threads, m->n_rows * m->n_cols, (size_t)1 << 16, knnwb_tree_finite_values, &f);
  return f.finite != 0;
}

/* A run of the tree: the query rows (NULL: the reference's own, a self run) against the
 * reference's, alone or over a group of ranks that each hold every row. */
typedef struct {
  const KnnwbMatrix *queries, *reference;
  const KnnwbKnnOptions *options;
  const KnnwbKnnGroup *group; /* NULL: alone */
  int threads;
} KnnwbTreeRun;

/* The rows searched: the query rows, or the reference's own. */
static const KnnwbMatrix *knnwb_tree_searched(const KnnwbTreeRun *run)
{
  return run->queries != NULL ? run->queries : run->reference;
}

/* The lists of lists' rows that the searched matrix marks absent (kept only for their numbers)
 * emptied, as the tile search leaves them; their count. */
static size_t knnwb_tree_empty_absent(const KnnwbMatrix *searched, KnnwbNeighbors *lists)
{
  size_t count = 0;
  for (size_t i = 0; i < lists->n_queries && searched->n_absent_rows > 0; i++)
    if (knnwb_matrix_row_is_absent(searched, lists->first_row + i)) {
      knnwb_knn_result_empty_rows(lists, i, i + 1);
      count++;
    }
  return count;
}

/* ok, agreed on by the group's ranks (NULL: alone). */
static gboolean knnwb_tree_agree(const KnnwbKnnGroup *group, gboolean ok, GError **error)
{
  return group == NULL ? ok : group->agree(group, ok, error);
}

/* Whether the request passes its checks (sizes, memory, k against the reference rows not absent)
 * and every value is finite (*finite), on every rank. The checks come first: they refuse a run
 * too large for memory before a value is read. */
static gboolean knnwb_tree_check(const KnnwbTreeRun *run, gboolean *finite, GError **error)
{
  const KnnwbMatrix *searched = knnwb_tree_searched(run), *reference = run->reference;
  const gboolean self = run->queries == NULL;
  const size_t nq = searched->n_rows, n = reference->n_rows, k = run->options->k;
  *finite = FALSE;
  /* (as the tile search: rows absent as read are no one's neighbours; a self run whose rows are
   * all absent has nothing to refuse) */
  const size_t valid = n - MIN(reference->n_absent_rows, n);
  const size_t available = self ? (valid > 0 ? valid - 1 : 0) : valid;
  const gboolean ok =
      knnwb_knn_check_sizes(nq, n, searched->n_cols, reference->n_cols, nq, n, self, run->options,
                            error) &&
      ((self && valid == 0) || knnwb_knn_check_available(k, available, valid, n, self, error));
  if (!knnwb_tree_agree(run->group, ok, error))
    return FALSE;
  /* (the ranks hold the same rows: all go on, or none) */
  int64_t all_finite = knnwb_tree_finite(reference, run->threads) &&
                       (self || knnwb_tree_finite(run->queries, run->threads));
  if (run->group != NULL && !run->group->reduce(run->group, &all_finite, 1, KNNWB_GROUP_MIN, error))
    return FALSE;
  *finite = all_finite != 0;
  return TRUE;
}

/* The tree of the reference's rows, on every rank. */
static gboolean knnwb_tree_build_all(KnnwbTree *tree, const KnnwbTreeRun *run, GError **error)
{
  const KnnwbMatrix *data = run->reference;
  gboolean ok = knnwb_tree_build(tree, data->values, data->n_rows, data->n_cols,
                                 data->n_absent_rows > 0 ? data->absent_rows : NULL, run->threads,
                                 run->options->cancel);
  if (!ok && tree->stopped)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "cancelled while building the tree");
  else if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the tree of %zu rows of %zu columns", data->n_rows, data->n_cols);
  if (!knnwb_tree_agree(run->group, ok, error)) {
    if (ok)
      knnwb_tree_clear(tree);
    return FALSE;
  }
  return TRUE;
}

/* Rows [s->first, s->last) searched into s->lists, on every rank; the lists freed on failure. */
static gboolean knnwb_tree_search_all(KnnwbTreeSearch *s, const KnnwbTreeRun *run, GError **error)
{
  knnwb_tree_search(s, run->threads);
  if (s->cancelled)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "cancelled while searching the tree");
  if (!knnwb_tree_agree(run->group, !s->cancelled, error)) {
    g_clear_pointer(&s->lists, knnwb_neighbors_free);
    return FALSE;
  }
  return TRUE;
}

/* The lists of this rank's rows (alone: every row) named for the tree, or, with a group whose
 * caller wants them all, every row's gathered. NULL (lists freed) on failure. */
static KnnwbNeighbors *knnwb_tree_lists_out(const KnnwbTreeRun *run, KnnwbNeighbors *lists,
                                            GError **error)
{
  const KnnwbKnnGroup *group = run->group;
  lists->backend_used = group != NULL ? g_strdup_printf("cpu (k-d tree) x %d ranks", group->size)
                                      : g_strdup("cpu (k-d tree)");
  lists->screen_used = KNNWB_SCREEN_FP32;
  if (group == NULL || run->options->group_own_rows)
    return lists;
  KnnwbNeighbors *all =
      knnwb_knn_group_gather(group, lists, knnwb_tree_searched(run)->n_rows, error);
  knnwb_neighbors_free(lists);
  return all;
}

/* The run: checked, the tree built, this rank's rows searched. TRUE with *result NULL when a value
 * is not finite (the tile search says where). */
static gboolean knnwb_tree_run(KnnwbTreeRun *run, KnnwbNeighbors **result, GError **error)
{
  *result = NULL;
  const KnnwbKnnOptions *options = run->options;
  const KnnwbMatrix *searched = knnwb_tree_searched(run);
  const size_t nq = searched->n_rows, k = options->k;
  run->group = options->group != NULL && options->group->size > 1 ? options->group : NULL;
  g_return_val_if_fail(run->group == NULL || !options->group_split, FALSE);
  KnnwbTreeSearch s = {.queries = run->queries,
                       .metric = options->metric,
                       .k = k,
                       .first = 0,
                       .last = nq,
                       .options = options};
  run->threads = knnwb_thread_count(options->n_threads);
  if (run->group != NULL) { /* an even share of the rows; the host's cores shared by its ranks */
    knnwb_knn_group_rows(nq, run->group->rank, run->group->size, &s.first, &s.last);
    if (options->n_threads <= 0)
      run->threads = MAX(1, run->threads / MAX(1, run->group->local_size));
  }
  const gint64 start = g_get_monotonic_time();
  gboolean finite;
  if (!knnwb_tree_check(run, &finite, error))
    return FALSE;
  if (!finite)
    return TRUE;
  KnnwbTree tree;
  if (!knnwb_tree_build_all(&tree, run, error))
    return FALSE;
  const gint64 built = g_get_monotonic_time();
  s.tree = &tree;
  s.lists = knnwb_knn_result_new_unset(s.first, s.last - s.first, k, error);
  if (s.lists != NULL)
    s.done = knnwb_tree_empty_absent(searched, s.lists);
  gboolean ok =
      knnwb_tree_agree(run->group, s.lists != NULL, error) && knnwb_tree_search_all(&s, run, error);
  knnwb_tree_clear(&tree);
  if (!ok) {
    g_clear_pointer(&s.lists, knnwb_neighbors_free);
    return FALSE;
  }
  g_debug("knnwb: tree: %zu rows of %zu columns, k = %zu: tree built in %.3f s (%d levels), "
          "%s rows %zu to %zu searched in %.3f s on %d thread(s)",
          run->reference->n_rows, run->reference->n_cols, k, (double)(built - start) / 1e6,
          tree.levels, run->queries != NULL ? "query" : "its", s.first, s.last,
          (double)(g_get_monotonic_time() - built) / 1e6, run->threads);
  *result = knnwb_tree_lists_out(run, s.lists, error);
  return *result != NULL;
}

gboolean knnwb_tree_self(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                         KnnwbNeighbors **result, GError **error)
{
  KnnwbTreeRun run = {.reference = data, .options = options};
  return knnwb_tree_run(&run, result, error);
}

gboolean knnwb_tree_query(const KnnwbMatrix *query, const KnnwbMatrix *reference,
                          const KnnwbKnnOptions *options, KnnwbNeighbors **result, GError **error)
{
  KnnwbTreeRun run = {.queries = query, .reference = reference, .options = options};
  return knnwb_tree_run(&run, result, error);
}
