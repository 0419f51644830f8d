/* The runs of core/tree/ (tree.h): when the tree takes a self or a query run, the request's
 * checks, the tree of the reference's rows (tree_build.c), this process's share of the rows
 * searched (tree_search.c), the ranks agreeing on the outcome, and every row's lists gathered
 * where a group's caller wants them. */
#include <string.h>
#include <knnwb/error.h>
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
  return options->metric < KNNWB_METRIC_COUNT; /* (every metric the engine knows) */
}

/* Whether rows of d columns are few enough for the tree, on the backend options choose (asked only
 * where it matters: asking starts CUDA's driver, 0.5 s and more on a GPU host). */
static gboolean knnwb_tree_columns(size_t d, const KnnwbKnnOptions *options)
{
  return d > 0 && (d <= KNNWB_TREE_MAX_COLUMNS_GPU ||
                   (d <= KNNWB_TREE_MAX_COLUMNS && !knnwb_knn_uses_gpu(options)));
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

/* A run of the tree: the query rows (NULL: the reference's own, a self run) against the
 * reference's, alone or over a group of ranks that each hold every row. */
typedef struct {
  const KnnwbMatrix *queries, *reference;
  const KnnwbKnnOptions *options;
  const KnnwbKnnGroup *group; /* NULL: alone */
  int threads;
  gboolean angular; /* the pearson family, spearman, cosine: the rows prepared as the engine's */
  KnnwbPrepared prepared_reference, prepared_queries;
  /* the rows in the tree's space (the values, or the prepared scored rows) and those left out
   * (absent as read, or degenerate and dropped: flags, or NULL), of the reference and the queries
   * (for a self run the reference's) */
  const float *reference_points, *query_points;
  const unsigned char *reference_invalid, *query_invalid;
  size_t reference_valid;
} KnnwbTreeRun;

/* The rows searched: the query rows, or the reference's own. */
static const KnnwbMatrix *knnwb_tree_searched(const KnnwbTreeRun *run)
{
  return run->queries != NULL ? run->queries : run->reference;
}

/* The lists of lists' rows that the searched rows leave out (run->query_invalid) emptied, as the
 * tile search leaves them; their count. */
static size_t knnwb_tree_empty_invalid(const KnnwbTreeRun *run, KnnwbNeighbors *lists)
{
  size_t count = 0;
  for (size_t i = 0; i < lists->n_queries && run->query_invalid != NULL; i++)
    if (run->query_invalid[lists->first_row + i]) {
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

/* Whether the request passes its checks of sizes and memory and every value is finite (*finite),
 * on every rank. The checks come first: they refuse a run too large for memory before a value is
 * read. */
static gboolean knnwb_tree_check(const KnnwbTreeRun *run, gboolean *finite, GError **error)
{
  const KnnwbMatrix *searched = knnwb_tree_searched(run), *reference = run->reference;
  const gboolean self = run->queries == NULL;
  const size_t nq = searched->n_rows, n = reference->n_rows;
  *finite = FALSE;
  if (!knnwb_tree_agree(run->group,
                        knnwb_knn_check_sizes_tree(nq, n, searched->n_cols, reference->n_cols, nq,
                                                   n, self, run->options, error),
                        error))
    return FALSE;
  /* (the ranks hold the same rows: all go on, or none; the tile search says which is not) */
  int64_t all_finite = knnwb_matrix_check_finite(reference, NULL) &&
                       (self || knnwb_matrix_check_finite(run->queries, NULL));
  if (run->group != NULL && !run->group->reduce(run->group, &all_finite, 1, KNNWB_GROUP_MIN, error))
    return FALSE;
  *finite = all_finite != 0;
  return TRUE;
}

/* A prepared matrix's degenerate rows reported as knnwb_prepared_init reports them (role, the
 * first one's number and label). Every rank holds the same rows and says the same: no rank's
 * number in front, as there would be after an agree. */
static gboolean knnwb_tree_report(const KnnwbPrepared *p, const KnnwbMatrix *data, const char *role,
                                  gboolean drop, GError **error)
{
  return p->n_degenerate == 0 || knnwb_prepare_report_degenerate(
                                     p->metric, role, drop, p->n_degenerate, p->first_degenerate,
                                     knnwb_matrix_row_label(data, p->first_degenerate), error);
}

/* The angular metrics' rows prepared as the engine prepares them (its roles and frames), their
 * degenerate rows flagged and, once every rank has its rows, reported (knnwb_tree_report). */
static gboolean knnwb_tree_prepare(KnnwbTreeRun *run, GError **error)
{
  const KnnwbKnnOptions *options = run->options;
  const KnnwbMatrix *reference = run->reference, *queries = run->queries;
  const gboolean self = queries == NULL;
  const char *role = self ? (options->data_name ? options->data_name : "data") : "reference";
  gboolean ok =
      knnwb_prepared_init_block(&run->prepared_reference, reference, 0, options->metric, role,
                                run->threads, NULL, options->cancel, error) &&
      (self || knnwb_prepared_init_block(&run->prepared_queries, queries, 0, options->metric,
                                         "query", run->threads, NULL, options->cancel, error));
  if (!knnwb_tree_agree(run->group, ok, error))
    return FALSE;
  const gboolean drop = options->drop_degenerate;
  return knnwb_tree_report(&run->prepared_reference, reference, role, drop, error) &&
         (self || knnwb_tree_report(&run->prepared_queries, queries, "query", drop, error));
}

/* The rows in the tree's space and those left out. Euclidean and manhattan: the values, and the
 * rows absent as read. The angular metrics: the rows prepared as the engine prepares them
 * (knnwb_tree_prepare), the scored rows, and the rows it leaves out. Then k against the reference
 * rows left (the engine's words). Over ranks every rank holds the same rows, so all pass or all
 * fail alike after knnwb_tree_prepare's agreement; split ranks' labels came with their rows
 * (knnwb_knn_self_together). */
static gboolean knnwb_tree_frame(KnnwbTreeRun *run, GError **error)
{
  const KnnwbKnnOptions *options = run->options;
  const KnnwbMatrix *reference = run->reference;
  const gboolean self = run->queries == NULL;
  if (!run->angular) {
    run->reference_points = reference->values;
    run->reference_invalid = reference->n_absent_rows > 0 ? reference->absent_rows : NULL;
    run->reference_valid = reference->n_rows - MIN(reference->n_absent_rows, reference->n_rows);
    const KnnwbMatrix *searched = knnwb_tree_searched(run);
    run->query_points = searched->values;
    run->query_invalid = searched->n_absent_rows > 0 ? searched->absent_rows : NULL;
  } else {
    if (!knnwb_tree_prepare(run, error))
      return FALSE;
    const KnnwbPrepared *q = self ? &run->prepared_reference : &run->prepared_queries;
    run->reference_points = run->prepared_reference.scored;
    run->reference_invalid = run->prepared_reference.invalid;
    run->reference_valid = run->prepared_reference.n - run->prepared_reference.n_invalid;
    run->query_points = q->scored;
    run->query_invalid = q->invalid;
  }
  /* (as the tile search: rows left out are no one's neighbours; a self run whose rows are all
   * left out has nothing to refuse) */
  const size_t n = reference->n_rows, valid = run->reference_valid;
  const size_t available = self ? (valid > 0 ? valid - 1 : 0) : valid;
  return (self && valid == 0) ||
         knnwb_knn_check_available(options->k, available, valid, n, self, error);
}

/* The tree of the reference's rows, on every rank. */
static gboolean knnwb_tree_build_all(KnnwbTree *tree, const KnnwbTreeRun *run, GError **error)
{
  const KnnwbMatrix *data = run->reference;
  gboolean ok = knnwb_tree_build(tree, run->reference_points, data->n_rows, data->n_cols,
                                 run->reference_invalid, run->threads, run->options->cancel);
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

/* This rank's rows searched in the built tree: their lists, or NULL (error set) on every rank. */
static KnnwbNeighbors *knnwb_tree_search_share(const KnnwbTreeRun *run, const KnnwbTree *tree,
                                               size_t first, size_t last, GError **error)
{
  const KnnwbKnnOptions *options = run->options;
  KnnwbTreeSearch s = {.tree = tree,
                       .queries = run->queries != NULL,
                       .query_points = run->query_points,
                       .query_invalid = run->query_invalid,
                       .metric = options->metric,
                       .angular = run->angular,
                       .exact_reference = &run->prepared_reference,
                       .exact_queries =
                           run->queries != NULL ? &run->prepared_queries : &run->prepared_reference,
                       .k = options->k,
                       .first = first,
                       .last = last,
                       .options = options};
  s.lists = knnwb_knn_result_new_unset(first, last - first, options->k, error);
  if (s.lists != NULL)
    s.done = knnwb_tree_empty_invalid(run, s.lists);
  if (!knnwb_tree_agree(run->group, s.lists != NULL, error) ||
      !knnwb_tree_search_all(&s, run, error)) {
    g_clear_pointer(&s.lists, knnwb_neighbors_free);
    return NULL;
  }
  return s.lists;
}

/* The run: checked, prepared, the tree built, this rank's rows searched. TRUE with *result NULL
 * when a value is not finite (the tile search says where). */
static gboolean knnwb_tree_run(KnnwbTreeRun *run, KnnwbNeighbors **result, GError **error)
{
  *result = NULL;
  const KnnwbKnnOptions *options = run->options;
  const size_t nq = knnwb_tree_searched(run)->n_rows;
  run->group = options->group != NULL && options->group->size > 1 ? options->group : NULL;
  g_return_val_if_fail(run->group == NULL || !options->group_split, FALSE);
  run->angular =
      options->metric != KNNWB_METRIC_EUCLIDEAN && options->metric != KNNWB_METRIC_MANHATTAN;
  size_t first = 0, last = nq;
  run->threads = knnwb_thread_count(options->n_threads);
  if (run->group != NULL) { /* an even share of the rows; the host's cores shared by its ranks */
    knnwb_knn_group_rows(nq, run->group->rank, run->group->size, &first, &last);
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
  gboolean ok = knnwb_tree_frame(run, error) && knnwb_tree_build_all(&tree, run, error);
  const gint64 built = g_get_monotonic_time();
  KnnwbNeighbors *lists = ok ? knnwb_tree_search_share(run, &tree, first, last, error) : NULL;
  if (ok) {
    g_debug("knnwb: tree: %zu rows of %zu columns, k = %zu: tree built in %.3f s (%d levels), "
            "%s rows %zu to %zu searched in %.3f s on %d thread(s)",
            run->reference->n_rows, run->reference->n_cols, options->k,
            (double)(built - start) / 1e6, tree.levels, run->queries != NULL ? "query" : "its",
            first, last, (double)(g_get_monotonic_time() - built) / 1e6, run->threads);
    knnwb_tree_clear(&tree);
  }
  knnwb_prepared_clear(&run->prepared_reference);
  knnwb_prepared_clear(&run->prepared_queries);
  if (lists == NULL)
    return FALSE;
  *result = knnwb_tree_lists_out(run, lists, error);
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
