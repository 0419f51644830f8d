/* The tree search of core/tree/ (tree.h): each row's k nearest found by descending the k-d tree,
 * the nearer child first, leaving out every node whose box lies beyond the row's k-th distance so
 * far. Rows are searched in the tree's order, so that rows searched one after another open the
 * same leaves. */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "engine/engine.h"
#include "group/group.h"
#include "tree/tree.h"
#include "tree/tree_internal.h"

/* A box's gap to a row and a row's distance carry relative rounding errors of at most (d + 2)
 * 2^-53 each (differences, squares, a sum of d terms, a square root); a node is left out only when
 * its gap exceeds the k-th distance by far more than both, so that no row at the k-th distance or
 * nearer, ties included, is ever left out. */
#define KNNWB_TREE_SLACK (1.0 + 1e-12)

typedef struct {
  const KnnwbTree *tree;
  KnnwbMetric metric;
  size_t k;
  size_t first, last;    /* the rows this process searches (all alone, a rank's share in a group) */
  KnnwbNeighbors *lists; /* rows [first, last) */
  const KnnwbKnnOptions *options;
  gsize done;      /* rows searched (atomic) */
  GMutex report;   /* one thread reports progress at a time */
  gint64 reported; /* when progress was last reported (under report) */
  gint cancelled;  /* (atomic) */
} KnnwbTreeSearch;

/* One row's search: its best so far, a max-heap by (distance, row) of count <= k entries. */
typedef struct {
  const float *x;
  int64_t self;
  size_t count, k;
  int64_t *index;
  double *distance;
} KnnwbTreeRow;

/* Entry a after entry b: by distance, then by row. */
static inline gboolean knnwb_tree_after(const KnnwbTreeRow *r, size_t a, size_t b)
{
  return r->distance[a] > r->distance[b] ||
         (r->distance[a] == r->distance[b] && r->index[a] > r->index[b]);
}

static inline void knnwb_tree_swap_entries(KnnwbTreeRow *r, size_t a, size_t b)
{
  const int64_t i = r->index[a];
  const double x = r->distance[a];
  r->index[a] = r->index[b];
  r->distance[a] = r->distance[b];
  r->index[b] = i;
  r->distance[b] = x;
}

/* The heap's first `count` entries made a heap again after entry 0 changed. O(log count). */
static void knnwb_tree_sift_down(KnnwbTreeRow *r, size_t count)
{
  for (size_t at = 0;;) {
    size_t worst = at;
    const size_t left = 2 * at + 1, right = left + 1;
    if (left < count && knnwb_tree_after(r, left, worst))
      worst = left;
    if (right < count && knnwb_tree_after(r, right, worst))
      worst = right;
    if (worst == at)
      return;
    knnwb_tree_swap_entries(r, at, worst);
    at = worst;
  }
}

/* Row `row` at distance offered to the best so far. */
static inline void knnwb_tree_offer(KnnwbTreeRow *r, int64_t row, double distance)
{
  if (r->count < r->k) {
    size_t at = r->count++;
    r->index[at] = row;
    r->distance[at] = distance;
    while (at > 0 && knnwb_tree_after(r, at, (at - 1) / 2)) {
      knnwb_tree_swap_entries(r, at, (at - 1) / 2);
      at = (at - 1) / 2;
    }
    return;
  }
  if (distance > r->distance[0] || (distance == r->distance[0] && row > r->index[0]))
    return;
  r->index[0] = row;
  r->distance[0] = distance;
  knnwb_tree_sift_down(r, r->count);
}

/* The least distance node t's box allows from the row: its gaps, summed as the metric sums. */
static double knnwb_tree_gap(const KnnwbTree *tree, KnnwbMetric metric, size_t t, const float *x)
{
  const size_t d = tree->d;
  const float *least = tree->box + t * 2 * d, *most = least + d;
  double sum = 0.0;
  for (size_t j = 0; j < d; j++) {
    const double gap = x[j] < least[j]  ? (double)least[j] - (double)x[j]
                       : x[j] > most[j] ? (double)x[j] - (double)most[j]
                                        : 0.0;
    sum += metric == KNNWB_METRIC_EUCLIDEAN ? gap * gap : gap;
  }
  return metric == KNNWB_METRIC_EUCLIDEAN ? sqrt(sum) : sum;
}

/* Whether node t, at gap from the row, may hold a row that enters its k best so far. Where the
 * k-th is at distance 0 (k copies of the row found), a row enters only at distance 0 and below
 * the k-th's row (distances are never negative), so a node whose lowest row is above it is left
 * out: copies of one row are split by row, and a row's search reads the copies it keeps, not all
 * of them. */
static inline gboolean knnwb_tree_open(const KnnwbTree *tree, const KnnwbTreeRow *r, size_t t,
                                       double gap)
{
  if (r->count < r->k)
    return TRUE;
  if (r->distance[0] == 0.0)
    return gap == 0.0 && tree->least[t] < r->index[0];
  return gap <= r->distance[0] * KNNWB_TREE_SLACK;
}

/* Node t (positions [lo, hi), at depth) searched for the row. */
static void knnwb_tree_visit(const KnnwbTreeSearch *s, KnnwbTreeRow *r, size_t t, size_t lo,
                             size_t hi, int depth)
{
  const KnnwbTree *tree = s->tree;
  if (depth == tree->levels) {
    for (size_t p = lo; p < hi; p++) {
      const int64_t row = tree->order[p];
      if (row != r->self)
        knnwb_tree_offer(
            r, row, knnwb_distance_exact(s->metric, r->x, tree->points + p * tree->d, tree->d));
    }
    return;
  }
  const size_t mid = knnwb_tree_mid(lo, hi), left = 2 * t + 1, right = left + 1;
  const double gap_left = knnwb_tree_gap(tree, s->metric, left, r->x);
  const double gap_right = knnwb_tree_gap(tree, s->metric, right, r->x);
  if (gap_left <= gap_right) {
    if (knnwb_tree_open(tree, r, left, gap_left))
      knnwb_tree_visit(s, r, left, lo, mid, depth + 1);
    if (knnwb_tree_open(tree, r, right, gap_right))
      knnwb_tree_visit(s, r, right, mid, hi, depth + 1);
  } else {
    if (knnwb_tree_open(tree, r, right, gap_right))
      knnwb_tree_visit(s, r, right, mid, hi, depth + 1);
    if (knnwb_tree_open(tree, r, left, gap_left))
      knnwb_tree_visit(s, r, left, lo, mid, depth + 1);
  }
}

/* The best so far into the list of the row at `row` of lists, by (distance, row), padded with -1
 * and +inf. */
static void knnwb_tree_write(KnnwbTreeRow *r, KnnwbNeighbors *lists, size_t row)
{
  const size_t found = r->count, k = lists->k;
  for (size_t count = found; count > 1; count--) { /* (the heap sorted: the last after) */
    knnwb_tree_swap_entries(r, 0, count - 1);
    knnwb_tree_sift_down(r, count - 1);
  }
  memcpy(lists->indices + row * k, r->index, found * sizeof(int64_t));
  memcpy(lists->distances + row * k, r->distance, found * sizeof(double));
  for (size_t slot = found; slot < k; slot++) {
    lists->indices[row * k + slot] = -1;
    lists->distances[row * k + slot] = INFINITY;
  }
  lists->n_found[row] = (int32_t)found;
}

/* Progress, from one thread at a time and at most ten times a second. */
static void knnwb_tree_report(KnnwbTreeSearch *s, size_t rows)
{
  const gsize done = g_atomic_pointer_add(&s->done, rows) + rows;
  if (s->options->progress == NULL || !g_mutex_trylock(&s->report))
    return;
  const gint64 now = g_get_monotonic_time();
  if (now - s->reported >= 100000 || done == s->last - s->first) {
    s->reported = now;
    s->options->progress(done, s->last - s->first, s->options->progress_data);
  }
  g_mutex_unlock(&s->report);
}

/* The rows at positions [first, last) of the tree's order that this process searches. */
static void knnwb_tree_search_rows(size_t first, size_t last, void *data)
{
  KnnwbTreeSearch *s = data;
  const volatile gint *cancel = s->options->cancel;
  if (g_atomic_int_get(&s->cancelled) || (cancel != NULL && g_atomic_int_get(cancel))) {
    g_atomic_int_set(&s->cancelled, 1);
    return;
  }
  const KnnwbTree *tree = s->tree;
  KnnwbTreeRow r = {.k = s->k, .index = g_new(int64_t, s->k), .distance = g_new(double, s->k)};
  size_t searched = 0;
  for (size_t p = first; p < last; p++) {
    const int64_t row = tree->order[p];
    if ((size_t)row < s->first || (size_t)row >= s->last)
      continue; /* (another rank's) */
    r.x = tree->points + p * tree->d;
    r.self = row;
    r.count = 0;
    knnwb_tree_visit(s, &r, 0, 0, tree->n, 0);
    knnwb_tree_write(&r, s->lists, (size_t)row - s->first);
    searched++;
  }
  g_free(r.index);
  g_free(r.distance);
  knnwb_tree_report(s, searched);
}

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

gboolean knnwb_tree_applies_shape(size_t n, size_t d, const KnnwbKnnOptions *options)
{
  if (!knnwb_tree_may_apply(options))
    return FALSE;
  const gboolean any_size = g_strcmp0(g_getenv("KNNWB_TREE"), "1") == 0;
  if (d == 0 || options->k < 1 || options->k >= n || n > (size_t)INT64_MAX ||
      (!any_size && n < KNNWB_TREE_MIN_ROWS))
    return FALSE;
  return d <= (knnwb_knn_uses_gpu(options) ? KNNWB_TREE_MAX_COLUMNS_GPU : KNNWB_TREE_MAX_COLUMNS);
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

/* The lists of lists' rows that data marks absent (kept only for their numbers: not in the tree,
 * so never a neighbour) emptied, as the tile search leaves them; their count. */
static size_t knnwb_tree_empty_absent(const KnnwbMatrix *data, KnnwbNeighbors *lists)
{
  size_t count = 0;
  for (size_t i = 0; i < lists->n_queries && data->n_absent_rows > 0; i++)
    if (knnwb_matrix_row_is_absent(data, lists->first_row + i)) {
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

/* Whether the request passes its checks (sizes, memory, k against the rows not absent) and every
 * value is finite (*finite), on every rank. The checks come first: they refuse a run too large for
 * memory before a value is read. */
static gboolean knnwb_tree_check(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                                 const KnnwbKnnGroup *group, int threads, gboolean *finite,
                                 GError **error)
{
  const size_t n = data->n_rows, d = data->n_cols;
  *finite = FALSE;
  /* (as the tile search: rows absent as read are no one's neighbours, and when every row is
   * absent there is nothing to refuse) */
  const size_t valid = n - MIN(data->n_absent_rows, n);
  const gboolean ok =
      knnwb_knn_check_sizes(n, n, d, d, n, n, TRUE, options, error) &&
      (valid == 0 || knnwb_knn_check_available(options->k, valid - 1, valid, n, TRUE, error));
  if (!knnwb_tree_agree(group, ok, error))
    return FALSE;
  KnnwbTreeFinite f = {.values = data->values, .finite = 1};
  knnwb_parallel_for(threads, n * d, (size_t)1 << 16, knnwb_tree_finite_values, &f);
  int64_t all_finite = f.finite; /* (the ranks hold the same rows; all go on, or none) */
  if (group != NULL && !group->reduce(group, &all_finite, 1, KNNWB_GROUP_MIN, error))
    return FALSE;
  *finite = all_finite != 0;
  return TRUE;
}

/* The tree of data's rows, on every rank. */
static gboolean knnwb_tree_build_all(KnnwbTree *tree, const KnnwbMatrix *data,
                                     const KnnwbKnnOptions *options, const KnnwbKnnGroup *group,
                                     int threads, GError **error)
{
  gboolean ok = knnwb_tree_build(tree, data->values, data->n_rows, data->n_cols,
                                 data->n_absent_rows > 0 ? data->absent_rows : NULL, threads,
                                 options->cancel);
  if (!ok && tree->stopped)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "cancelled while building the tree");
  else if (!ok)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_NO_MEMORY,
                "cannot allocate the tree of %zu rows of %zu columns", data->n_rows, data->n_cols);
  if (!knnwb_tree_agree(group, ok, error)) {
    if (ok)
      knnwb_tree_clear(tree);
    return FALSE;
  }
  return TRUE;
}

/* Rows [s->first, s->last) searched into s->lists, on every rank; the lists freed on failure. */
static gboolean knnwb_tree_search_all(KnnwbTreeSearch *s, const KnnwbKnnGroup *group, int threads,
                                      GError **error)
{
  g_mutex_init(&s->report);
  knnwb_parallel_for(threads, s->tree->n, 256, knnwb_tree_search_rows, s);
  g_mutex_clear(&s->report);
  if (s->cancelled)
    g_set_error(error, KNNWB_ERROR, KNNWB_ERROR_CANCELLED, "cancelled while searching the tree");
  if (!knnwb_tree_agree(group, !s->cancelled, error)) {
    g_clear_pointer(&s->lists, knnwb_neighbors_free);
    return FALSE;
  }
  return TRUE;
}

gboolean knnwb_tree_self(const KnnwbMatrix *data, const KnnwbKnnOptions *options,
                         KnnwbNeighbors **result, GError **error)
{
  *result = NULL;
  const size_t n = data->n_rows, d = data->n_cols, k = options->k;
  const KnnwbKnnGroup *group =
      options->group != NULL && options->group->size > 1 ? options->group : NULL;
  g_return_val_if_fail(group == NULL || !options->group_split, FALSE);
  KnnwbTreeSearch s = {
      .metric = options->metric, .k = k, .first = 0, .last = n, .options = options};
  int threads = knnwb_thread_count(options->n_threads);
  if (group != NULL) { /* an even share of the rows; the host's cores shared by its ranks */
    knnwb_knn_group_rows(n, group->rank, group->size, &s.first, &s.last);
    if (options->n_threads <= 0)
      threads = MAX(1, threads / MAX(1, group->local_size));
  }
  const gint64 start = g_get_monotonic_time();
  gboolean finite;
  if (!knnwb_tree_check(data, options, group, threads, &finite, error))
    return FALSE;
  if (!finite)
    return TRUE; /* (the tile search says which row) */
  KnnwbTree tree;
  if (!knnwb_tree_build_all(&tree, data, options, group, threads, error))
    return FALSE;
  const gint64 built = g_get_monotonic_time();
  s.tree = &tree;
  s.lists = knnwb_knn_result_new_unset(s.first, s.last - s.first, k, error);
  if (s.lists != NULL)
    s.done = knnwb_tree_empty_absent(data, s.lists);
  gboolean ok = knnwb_tree_agree(group, s.lists != NULL, error) &&
                knnwb_tree_search_all(&s, group, threads, error);
  knnwb_tree_clear(&tree);
  if (!ok) {
    g_clear_pointer(&s.lists, knnwb_neighbors_free);
    return FALSE;
  }
  s.lists->backend_used = group != NULL ? g_strdup_printf("cpu (k-d tree) x %d ranks", group->size)
                                        : g_strdup("cpu (k-d tree)");
  s.lists->screen_used = KNNWB_SCREEN_FP32;
  g_debug("knnwb: tree: %zu rows of %zu columns, k = %zu: tree built in %.3f s (%d levels), "
          "rows %zu to %zu searched in %.3f s on %d thread(s)",
          n, d, k, (double)(built - start) / 1e6, tree.levels, s.first, s.last,
          (double)(g_get_monotonic_time() - built) / 1e6, threads);
  if (group != NULL && !options->group_own_rows) { /* every row's lists on every rank */
    KnnwbNeighbors *all = knnwb_knn_group_gather(group, s.lists, n, error);
    knnwb_neighbors_free(s.lists);
    s.lists = all;
    if (all == NULL)
      return FALSE;
  }
  *result = s.lists;
  return TRUE;
}
