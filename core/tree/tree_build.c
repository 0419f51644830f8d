/* The k-d tree of core/tree/ (tree_internal.h): balanced on positions, each node split at its
 * rows' median on its widest column, the top levels on one thread and the subtrees below them on
 * every thread. The tree is the same on any number of threads. The rows' values move with their
 * places (tree->points), so that a node's rows are read one after another, not through order. */
#include <string.h>
#include <knnwb/parallel.h>
#include "tree/tree_internal.h"

/* The leaves' depth: the least L with ceil(n / 2^L) <= KNNWB_TREE_LEAF. O(log n). */
static int knnwb_tree_levels(size_t n)
{
  int levels = 0;
  while (levels < 62 && ((n + ((size_t)1 << levels) - 1) >> levels) > KNNWB_TREE_LEAF)
    levels++;
  return levels;
}

/* Node t's box over positions [lo, hi), and its widest column (the lowest of equals). */
static size_t knnwb_tree_box(KnnwbTree *tree, size_t t, size_t lo, size_t hi)
{
  const size_t d = tree->d;
  float *least = tree->box + t * 2 * d, *most = least + d;
  const float *first = tree->points + lo * d;
  memcpy(least, first, d * sizeof(float));
  memcpy(most, first, d * sizeof(float));
  int64_t lowest = tree->order[lo];
  for (size_t p = lo + 1; p < hi; p++) {
    lowest = MIN(lowest, tree->order[p]);
    const float *x = tree->points + p * d;
    for (size_t j = 0; j < d; j++) {
      least[j] = x[j] < least[j] ? x[j] : least[j];
      most[j] = x[j] > most[j] ? x[j] : most[j];
    }
  }
  tree->least[t] = lowest;
  size_t widest = 0;
  for (size_t j = 1; j < d; j++)
    if ((double)most[j] - least[j] > (double)most[widest] - least[widest])
      widest = j;
  return widest;
}

/* The row at position a before the row at position b on column j: by value, then by row (every
 * key distinct). */
static inline gboolean knnwb_tree_before(const KnnwbTree *tree, size_t j, size_t a, size_t b)
{
  const float va = tree->points[a * tree->d + j], vb = tree->points[b * tree->d + j];
  return va < vb || (va == vb && tree->order[a] < tree->order[b]);
}

/* The rows at positions a and b trade places, with their values. */
static inline void knnwb_tree_swap(KnnwbTree *tree, size_t a, size_t b)
{
  const int64_t t = tree->order[a];
  tree->order[a] = tree->order[b];
  tree->order[b] = t;
  float *x = tree->points + a * tree->d, *y = tree->points + b * tree->d;
  for (size_t j = 0; j < tree->d; j++) {
    const float v = x[j];
    x[j] = y[j];
    y[j] = v;
  }
}

/* Positions [lo, hi) rearranged so that position nth holds the row that sorting them on column j
 * would put there, those before it before it and those after after it. The pivot is the median of
 * three positions that a fixed sequence picks, so no order of the input is the slow case.
 * O(hi - lo) expected. */
static void knnwb_tree_select(KnnwbTree *tree, size_t j, size_t lo, size_t hi, size_t nth)
{
  guint64 state = 0x9e3779b97f4a7c15ull ^ (guint64)nth;
  while (hi - lo > 16) {
    size_t pick[3];
    for (int s = 0; s < 3; s++) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      pick[s] = lo + (size_t)(state % (guint64)(hi - lo));
    }
    const size_t a = pick[0], b = pick[1], c = pick[2];
    size_t middle = knnwb_tree_before(tree, j, a, b)
                        ? (knnwb_tree_before(tree, j, b, c)   ? pick[1]
                           : knnwb_tree_before(tree, j, a, c) ? pick[2]
                                                              : pick[0])
                        : (knnwb_tree_before(tree, j, a, c)   ? pick[0]
                           : knnwb_tree_before(tree, j, b, c) ? pick[2]
                                                              : pick[1]);
    knnwb_tree_swap(tree, middle, hi - 1); /* (the pivot, at hi - 1 while the rest is split) */
    size_t store = lo;
    for (size_t p = lo; p + 1 < hi; p++)
      if (knnwb_tree_before(tree, j, p, hi - 1))
        knnwb_tree_swap(tree, p, store++);
    knnwb_tree_swap(tree, store, hi - 1);
    if (nth == store)
      return;
    if (nth < store)
      hi = store;
    else
      lo = store + 1;
  }
  for (size_t p = lo + 1; p < hi; p++) /* (a few rows: inserted in order) */
    for (size_t q = p; q > lo && knnwb_tree_before(tree, j, q, q - 1); q--)
      knnwb_tree_swap(tree, q, q - 1);
}

/* Whether the build stops at a node of hi - lo rows: the caller's flag seen raised, now or by
 * another thread. */
static gboolean knnwb_tree_stops(KnnwbTree *tree, size_t lo, size_t hi)
{
  if (hi - lo >= KNNWB_TREE_POLL_ROWS && tree->cancel != NULL && g_atomic_int_get(tree->cancel))
    g_atomic_int_set(&tree->stopped, 1);
  return g_atomic_int_get(&tree->stopped) != 0;
}

/* Node t (positions [lo, hi), at depth) and every node below it. */
static void knnwb_tree_build_below(KnnwbTree *tree, size_t t, size_t lo, size_t hi, int depth)
{
  for (; !knnwb_tree_stops(tree, lo, hi); depth++) {
    const size_t widest = knnwb_tree_box(tree, t, lo, hi);
    if (depth == tree->levels)
      return;
    const size_t mid = knnwb_tree_mid(lo, hi);
    knnwb_tree_select(tree, widest, lo, hi, mid);
    knnwb_tree_build_below(tree, 2 * t + 1, lo, mid, depth + 1);
    t = 2 * t + 2; /* (the right child in this loop) */
    lo = mid;
  }
}

typedef struct {
  KnnwbTree *tree;
  int depth;      /* the subtrees' depth */
  size_t *ranges; /* per subtree: lo, hi */
} KnnwbTreeSubtrees;

/* The nodes above depth sub->depth, and each subtree's range. */
static void knnwb_tree_build_top(KnnwbTreeSubtrees *sub, size_t t, size_t lo, size_t hi, int depth)
{
  if (knnwb_tree_stops(sub->tree, lo, hi))
    return;
  if (depth == sub->depth) {
    const size_t s = t - (((size_t)1 << depth) - 1);
    sub->ranges[2 * s] = lo;
    sub->ranges[2 * s + 1] = hi;
    return;
  }
  const size_t widest = knnwb_tree_box(sub->tree, t, lo, hi);
  const size_t mid = knnwb_tree_mid(lo, hi);
  knnwb_tree_select(sub->tree, widest, lo, hi, mid);
  knnwb_tree_build_top(sub, 2 * t + 1, lo, mid, depth + 1);
  knnwb_tree_build_top(sub, 2 * t + 2, mid, hi, depth + 1);
}

static void knnwb_tree_build_subtrees(size_t first, size_t last, void *data)
{
  KnnwbTreeSubtrees *sub = data;
  const size_t base = ((size_t)1 << sub->depth) - 1;
  for (size_t s = first; s < last; s++)
    knnwb_tree_build_below(sub->tree, base + s, sub->ranges[2 * s], sub->ranges[2 * s + 1],
                           sub->depth);
}

/* The rows not marked in absent (NULL: every row), in order, with their values, into the tree's
 * order and points; their count. */
static size_t knnwb_tree_place_rows(KnnwbTree *tree, const float *values, size_t n,
                                    const unsigned char *absent)
{
  const size_t d = tree->d;
  if (absent == NULL) {
    for (size_t i = 0; i < n; i++)
      tree->order[i] = (int64_t)i;
    memcpy(tree->points, values, n * d * sizeof(float));
    return n;
  }
  size_t placed = 0;
  for (size_t i = 0; i < n; i++)
    if (!absent[i]) {
      tree->order[placed] = (int64_t)i;
      memcpy(tree->points + placed * d, values + i * d, d * sizeof(float));
      placed++;
    }
  return placed;
}

gboolean knnwb_tree_build(KnnwbTree *tree, const float *values, size_t n, size_t d,
                          const unsigned char *absent, int threads, const volatile gint *cancel)
{
  memset(tree, 0, sizeof *tree);
  tree->cancel = cancel;
  tree->d = d;
  tree->order = g_try_new(int64_t, MAX(n, (size_t)1));
  tree->points = g_try_new(float, MAX(n * d, (size_t)1));
  if (tree->order == NULL || tree->points == NULL) {
    knnwb_tree_clear(tree);
    return FALSE;
  }
  n = tree->n = knnwb_tree_place_rows(tree, values, n, absent);
  tree->levels = knnwb_tree_levels(n);
  tree->nodes = ((size_t)2 << tree->levels) - 1;
  tree->box = g_try_new(float, tree->nodes * 2 * MAX(d, (size_t)1));
  tree->least = g_try_new(int64_t, tree->nodes);
  if (tree->box == NULL || tree->least == NULL) {
    knnwb_tree_clear(tree);
    return FALSE;
  }
  if (n == 0)
    return TRUE;
  /* The top levels on this thread, down to at least 4 subtrees a thread. */
  KnnwbTreeSubtrees sub = {.tree = tree, .depth = 0};
  while (sub.depth < tree->levels && ((size_t)1 << sub.depth) < 4 * (size_t)MAX(threads, 1))
    sub.depth++;
  sub.ranges = g_new0(size_t, (size_t)2 << sub.depth);
  knnwb_tree_build_top(&sub, 0, 0, n, 0);
  if (!g_atomic_int_get(&tree->stopped))
    knnwb_parallel_for(threads, (size_t)1 << sub.depth, 1, knnwb_tree_build_subtrees, &sub);
  g_free(sub.ranges);
  if (g_atomic_int_get(&tree->stopped)) {
    knnwb_tree_clear(tree);
    return FALSE;
  }
  return TRUE;
}

void knnwb_tree_clear(KnnwbTree *tree)
{
  g_clear_pointer(&tree->order, g_free);
  g_clear_pointer(&tree->points, g_free);
  g_clear_pointer(&tree->box, g_free);
  g_clear_pointer(&tree->least, g_free);
}
