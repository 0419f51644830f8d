/* The tree search of core/tree/ (tree_internal.h): each row's k nearest found by descending the
 * k-d tree, the nearer child first, leaving out every node whose box lies beyond the row's k-th
 * distance so far. A self run's rows are searched in the tree's order, so that rows searched one
 * after another open the same leaves. */
#include <math.h>
#include <string.h>
#include <knnwb/error.h>
#include <knnwb/parallel.h>
#include "engine/engine.h"
#include "tree/tree_internal.h"

/* A box's gap to a row and a row's distance carry relative rounding errors of at most (d + 2)
 * 2^-53 each (differences, squares, a sum of d terms, a square root); a node is left out only when
 * its gap exceeds the k-th distance by far more than both, so that no row at the k-th distance or
 * nearer, ties included, is ever left out. */
#define KNNWB_TREE_SLACK (1.0 + 1e-12)

/* The angular metrics (the pearson family, spearman, cosine) search the rows as the engine scores
 * them: u = (x - mean) / |x - mean| in double, rounded once to float (|u~ - u| <= 2^-24), where
 * 1 - r = |u_x - u_y|^2 / 2 for the unrounded u (abs-pearson: the nearer of u_y and -u_y). A box
 * at euclidean gap g from u~_x (relative error under 1e-12) holds only rows with
 * |u_x - u_y| >= g (1 - 1e-12) - 2^-22, and the engine's double distance lies within
 * (2d + 6) 2^-53, far below 1e-12, of 1 - r: so that bound squared, halved and less 1e-12 is below
 * every distance the box's rows can have. */
#define KNNWB_TREE_ANGULAR_ROUNDING (1.0 / 4194304.0) /* 2^-22: both rows' rounding */
#define KNNWB_TREE_ANGULAR_SLACK 1e-12

/* One row's search: its best so far, a max-heap by (distance, row) of count <= k entries. */
typedef struct {
  const float *x; /* its coordinates in the tree's space */
  size_t at;      /* its row among the searched (query or self) rows */
  int64_t self;
  int32_t group; /* its group (-1: no groups) */
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

/* The gaps of node t's box to sign x (sign 1 or -1), summed as euclidean (TRUE) or manhattan
 * distances sum them. */
static double knnwb_tree_gap(const KnnwbTree *tree, gboolean euclidean, size_t t, const float *x,
                             float sign)
{
  const size_t d = tree->d;
  const float *least = tree->box + t * 2 * d, *most = least + d;
  double sum = 0.0;
  for (size_t j = 0; j < d; j++) {
    const float v = sign * x[j];
    const double gap = v < least[j]  ? (double)least[j] - (double)v
                       : v > most[j] ? (double)v - (double)most[j]
                                     : 0.0;
    sum += euclidean ? gap * gap : gap;
  }
  return euclidean ? sqrt(sum) : sum;
}

/* A lower bound of every distance from the row to node t's rows: the box's gap (euclidean,
 * manhattan), or for the angular metrics the bound above (negative where it allows 0). */
static double knnwb_tree_bound(const KnnwbTreeSearch *s, size_t t, const float *x)
{
  if (!s->angular)
    return knnwb_tree_gap(s->tree, s->metric == KNNWB_METRIC_EUCLIDEAN, t, x, 1.0f);
  double g = knnwb_tree_gap(s->tree, TRUE, t, x, 1.0f);
  if (s->metric == KNNWB_METRIC_ABS_PEARSON)
    g = MIN(g, knnwb_tree_gap(s->tree, TRUE, t, x, -1.0f));
  const double reach = g * (1.0 - 1e-12) - KNNWB_TREE_ANGULAR_ROUNDING;
  return (reach > 0.0 ? reach * reach / 2.0 : 0.0) - KNNWB_TREE_ANGULAR_SLACK;
}

/* Whether node t's rows all hold the same values: its box a point. O(d). */
static inline gboolean knnwb_tree_is_point(const KnnwbTree *tree, size_t t)
{
  const float *least = tree->box + t * 2 * tree->d, *most = least + tree->d;
  for (size_t j = 0; j < tree->d; j++)
    if (least[j] != most[j])
      return FALSE;
  return TRUE;
}

/* Whether node t (positions from lo), whose rows lie at bound or farther (knnwb_tree_bound), may
 * hold a row that enters the row's k best so far. A row at the k-th's distance enters only below
 * the k-th's row, so where every row of the node lies at that distance, a node whose lowest row is
 * above it is left out: where the k-th is at distance 0 (k copies of the row found; distances are
 * never negative), and, for euclidean and manhattan, where the node's rows are copies of one row
 * (one distance from the row, that of its first position). Copies lie in the tree by row, so a
 * row reads the k copies it keeps, not all of them. */
static inline gboolean knnwb_tree_open(const KnnwbTreeSearch *s, const KnnwbTreeRow *r, size_t t,
                                       size_t lo, double bound)
{
  if (s->node_group != NULL && s->node_group[t] == r->group)
    return FALSE; /* (every row of the node in the row's own group) */
  if (r->count < r->k)
    return TRUE;
  const double kth = r->distance[0];
  const int64_t kth_row = r->index[0];
  if (kth == 0.0)
    return bound <= 0.0 && s->tree->least[t] < kth_row;
  if (!(s->angular ? bound <= kth : bound <= kth * KNNWB_TREE_SLACK))
    return FALSE;
  if (s->angular || !knnwb_tree_is_point(s->tree, t))
    return TRUE;
  const double distance = knnwb_distance_lp(s->metric == KNNWB_METRIC_EUCLIDEAN, r->x,
                                            s->tree->points + lo * s->tree->d, s->tree->d);
  return distance < kth || (distance == kth && s->tree->least[t] < kth_row);
}

/* The distance of the row to the tree's row at position p, as the engine computes it. */
static inline double knnwb_tree_distance(const KnnwbTreeSearch *s, const KnnwbTreeRow *r, size_t p)
{
  const KnnwbTree *tree = s->tree;
  if (s->angular)
    return knnwb_prepared_distance(s->exact_queries, r->at, s->exact_reference,
                                   (size_t)tree->order[p]);
  return knnwb_distance_lp(s->metric == KNNWB_METRIC_EUCLIDEAN, r->x, tree->points + p * tree->d,
                           tree->d);
}

/* Node t (positions [lo, hi), at depth) searched for the row. */
static void knnwb_tree_visit(const KnnwbTreeSearch *s, KnnwbTreeRow *r, size_t t, size_t lo,
                             size_t hi, int depth)
{
  const KnnwbTree *tree = s->tree;
  if (depth == tree->levels) {
    for (size_t p = lo; p < hi; p++) {
      const int64_t row = tree->order[p];
      if (row != r->self && (s->group == NULL || s->group[row] != r->group))
        knnwb_tree_offer(r, row, knnwb_tree_distance(s, r, p));
    }
    return;
  }
  const size_t mid = knnwb_tree_mid(lo, hi), left = 2 * t + 1, right = left + 1;
  const double gap_left = knnwb_tree_bound(s, left, r->x);
  const double gap_right = knnwb_tree_bound(s, right, r->x);
  if (gap_left <= gap_right) {
    if (knnwb_tree_open(s, r, left, lo, gap_left))
      knnwb_tree_visit(s, r, left, lo, mid, depth + 1);
    if (knnwb_tree_open(s, r, right, mid, gap_right))
      knnwb_tree_visit(s, r, right, mid, hi, depth + 1);
  } else {
    if (knnwb_tree_open(s, r, right, mid, gap_right))
      knnwb_tree_visit(s, r, right, mid, hi, depth + 1);
    if (knnwb_tree_open(s, r, left, lo, gap_left))
      knnwb_tree_visit(s, r, left, lo, mid, depth + 1);
  }
}

/* The best so far into index and distance (k slots), by (distance, row), padded with -1 and
 * +inf. */
static void knnwb_tree_put(KnnwbTreeRow *r, int64_t *index, double *distance)
{
  const size_t found = r->count;
  for (size_t count = found; count > 1; count--) { /* (the heap sorted: the last after) */
    knnwb_tree_swap_entries(r, 0, count - 1);
    knnwb_tree_sift_down(r, count - 1);
  }
  memcpy(index, r->index, found * sizeof(int64_t));
  memcpy(distance, r->distance, found * sizeof(double));
  for (size_t slot = found; slot < r->k; slot++) {
    index[slot] = -1;
    distance[slot] = INFINITY;
  }
}

/* The best so far into the list of the row at `row` of lists. */
static void knnwb_tree_write(KnnwbTreeRow *r, KnnwbNeighbors *lists, size_t row)
{
  knnwb_tree_put(r, lists->indices + row * lists->k, lists->distances + row * lists->k);
  lists->n_found[row] = (int32_t)r->count;
}

/* Counts rows searched and offers the progress: the thread whose rows finish the search offers
 * the last count (knnwb_progress_throttle_offer waits for the lock for it). */
static void knnwb_tree_report(KnnwbTreeSearch *s, size_t rows)
{
  const gsize total = s->last - s->first;
  const gboolean finished = g_atomic_pointer_add(&s->done, rows) + rows == total;
  knnwb_progress_throttle_offer(&s->report, &s->done, total, finished, s->options->progress,
                                s->options->progress_data);
}

/* Whether the search stops: the caller's flag seen raised, now or by another thread. */
static gboolean knnwb_tree_search_stops(KnnwbTreeSearch *s)
{
  const volatile gint *cancel = s->options->cancel;
  if (g_atomic_int_get(&s->cancelled) || (cancel != NULL && g_atomic_int_get(cancel))) {
    g_atomic_int_set(&s->cancelled, 1);
    return TRUE;
  }
  return FALSE;
}

/* A self run: the rows at positions [first, last) of the tree's order that this process
 * searches. */
static void knnwb_tree_search_own(size_t first, size_t last, void *data)
{
  KnnwbTreeSearch *s = data;
  if (knnwb_tree_search_stops(s))
    return;
  const KnnwbTree *tree = s->tree;
  KnnwbTreeRow r = {.k = s->k, .index = g_new(int64_t, s->k), .distance = g_new(double, s->k)};
  size_t searched = 0;
  for (size_t p = first; p < last; p++) {
    const int64_t row = tree->order[p];
    if ((size_t)row < s->first || (size_t)row >= s->last)
      continue; /* (another rank's) */
    r.x = tree->points + p * tree->d;
    r.at = (size_t)row;
    r.self = row;
    r.group = s->group != NULL ? s->group[row] : -1;
    r.count = 0;
    knnwb_tree_visit(s, &r, 0, 0, tree->n, 0);
    knnwb_tree_write(&r, s->lists, (size_t)row - s->first);
    searched++;
  }
  g_free(r.index);
  g_free(r.distance);
  knnwb_tree_report(s, searched);
}

/* A query run: query rows s->first + [first, last), those left out (absent as read, degenerate)
 * left as they are. */
static void knnwb_tree_search_queries(size_t first, size_t last, void *data)
{
  KnnwbTreeSearch *s = data;
  if (knnwb_tree_search_stops(s))
    return;
  KnnwbTreeRow r = {.k = s->k, .index = g_new(int64_t, s->k), .distance = g_new(double, s->k)};
  size_t searched = 0;
  for (size_t i = first; i < last; i++) {
    const size_t row = s->first + i;
    if (s->query_invalid != NULL && s->query_invalid[row])
      continue;
    r.x = s->query_points + row * s->tree->d;
    r.at = row;
    r.self = -1;
    r.group = -1;
    r.count = 0;
    knnwb_tree_visit(s, &r, 0, 0, s->tree->n, 0);
    knnwb_tree_write(&r, s->lists, i);
    searched++;
  }
  g_free(r.index);
  g_free(r.distance);
  knnwb_tree_report(s, searched);
}

/* The given rows rows[first, last) of the tree's own (knnwb_tree_search_rows). */
typedef struct {
  KnnwbTreeSearch *s;
  const int64_t *rows;
  int64_t *index;
  double *distance;
} KnnwbTreeRows;

static void knnwb_tree_search_given(size_t first, size_t last, void *data)
{
  KnnwbTreeRows *given = data;
  KnnwbTreeSearch *s = given->s;
  if (knnwb_tree_search_stops(s))
    return;
  const size_t k = s->k;
  KnnwbTreeRow r = {.k = k, .index = g_new(int64_t, k), .distance = g_new(double, k)};
  for (size_t i = first; i < last; i++) {
    const int64_t row = given->rows[i];
    r.x = s->query_points + (size_t)row * s->tree->d;
    r.at = (size_t)row;
    r.self = row;
    r.group = s->group != NULL ? s->group[row] : -1;
    r.count = 0;
    knnwb_tree_visit(s, &r, 0, 0, s->tree->n, 0);
    knnwb_tree_put(&r, given->index + i * k, given->distance + i * k);
  }
  g_free(r.index);
  g_free(r.distance);
}

void knnwb_tree_search_rows(KnnwbTreeSearch *s, const int64_t *rows, size_t n_rows, int64_t *index,
                            double *distance, int threads)
{
  KnnwbTreeRows given = {s, rows, index, distance};
  knnwb_parallel_for(threads, n_rows, 256, knnwb_tree_search_given, &given);
}

void knnwb_tree_search(KnnwbTreeSearch *s, int threads)
{
  knnwb_progress_throttle_init(&s->report);
  if (!s->queries)
    knnwb_parallel_for(threads, s->tree->n, 256, knnwb_tree_search_own, s);
  else
    knnwb_parallel_for(threads, s->last - s->first, 256, knnwb_tree_search_queries, s);
  knnwb_progress_throttle_clear(&s->report);
}
